package v1alpha1

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestZZSlow(t *testing.T) {
	dir := os.Getenv("CORPUS")
	files, _ := filepath.Glob(filepath.Join(dir, "*"))
	stats := map[string]int{}
	defer func() { t.Log(stats) }()
	for _, f := range files {
		b, _ := os.ReadFile(f)
		lines := strings.Split(string(b), "\n")
		data, err := strconv.Unquote(strings.TrimSuffix(strings.TrimPrefix(lines[1], "[]byte("), ")"))
		if err != nil {
			t.Fatal(err)
		}
		ct, _ := strconv.Unquote(strings.TrimSuffix(strings.TrimPrefix(lines[2], "string("), ")"))
		start := time.Now()
		obj, err := Decode([]byte(data), ct)
		d1 := time.Since(start)
		if err != nil {
			stats[err.Error()[:min(20, len(err.Error()))]]++
		}
		if err == nil {
			stats["ok"]++
			switch o := obj.(type) {
			case *Runnable:
				ValidateRunnable(o, time.Now())
			case *Deployable:
				ValidateDeployable(o)
			case *Cluster:
				ValidateCluster(o)
			}
		}
		if el := time.Since(start); el > 50*time.Millisecond {
			t.Logf("%s: %v (decode %v) len=%d err=%v\n%.300q", filepath.Base(f), el, d1, len(data), err, data)
		}
	}
}
