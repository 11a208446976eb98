package stream

import (
	"encoding/json"
	"fmt"
	"runtime"
	"strings"
	"testing"
)

// TestDecodeEventHostileObjects: an agent (or a tenant shaping what it
// watches) chooses the object of an event, up to the stream's message
// size. FuzzDecodeEvent holds the one-pass reader to what encoding/json
// reads; this holds it to what encoding/json spends: on shapes chosen to
// make it work (nesting at the depth bound, a name given twice at the
// end, which sends it to its second reading, invalid UTF-8, many names),
// it allocates at most a small multiple of what encoding/json allocates
// to read the event and decode its object, and nesting past the bound is
// refused, as encoding/json refuses it.
func TestDecodeEventHostileObjects(t *testing.T) {
	allocated := func(fn func()) uint64 {
		var a, b runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&a)
		fn()
		runtime.ReadMemStats(&b)
		return b.TotalAlloc - a.TotalAlloc
	}
	deepArrays := strings.Repeat(strings.Repeat("[", 9990)+strings.Repeat("]", 9990)+",", 50)
	var distinct strings.Builder
	for i := range 60000 {
		fmt.Fprintf(&distinct, `"k%d":{},`, i)
	}
	for name, obj := range map[string]string{
		"arrays at the depth bound":           `{"x":[` + deepArrays + "1]}",
		"objects at the depth bound":          `{"x":[` + strings.Repeat(strings.Repeat(`{"a":`, 9990)+"1"+strings.Repeat("}", 9990)+",", 10) + "1]}",
		"a name twice at the end":             `{"x":[` + deepArrays + `1], "x":1}`,
		"one name 150,000 times":              "{" + strings.Repeat(`"a":1,`, 150000) + `"b":1}`,
		"60,000 names":                        "{" + distinct.String() + `"b":1}`,
		"300,000 empty objects":               `{"x":[` + strings.Repeat("{},", 300000) + "{}]}",
		"invalid UTF-8":                       `{"x":"` + strings.Repeat("\xff", 900000) + `"}`,
		"escapes":                             `{"x":"` + strings.Repeat(`\u00e9`, 150000) + `"}`,
		"a number of 900,000 digits (no map)": `{"x":1` + strings.Repeat("0", 900000) + `}`,
	} {
		t.Run(name, func(t *testing.T) {
			msg := []byte(`{"uid":"u","kind":"Pod","apiVersion":"v1","type":"ADDED","object":` + obj + `}`)
			var err error
			got := allocated(func() { _, _, err = DecodeEvent(msg, func(string, string) bool { return true }) })
			if err != nil {
				t.Fatal(err)
			}
			ref := allocated(func() {
				var ev Event
				_ = json.Unmarshal(msg, &ev)
				var m map[string]any
				_ = json.Unmarshal(ev.Object, &m)
			})
			if got > 4*ref+1<<20 {
				t.Errorf("%d bytes of message: %d bytes allocated, encoding/json %d", len(msg), got, ref)
			}
		})
	}
	deep := []byte(`{"uid":"u","kind":"Pod","type":"ADDED","object":{"x":` + strings.Repeat("[", 100000) + strings.Repeat("]", 100000) + `}}`)
	if _, _, err := DecodeEvent(deep, func(string, string) bool { return true }); err == nil {
		t.Error("nesting 100,000 deep was read")
	}
}
