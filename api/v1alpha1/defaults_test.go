package v1alpha1

import (
	"reflect"
	"testing"
)

func TestSetDefaults(t *testing.T) {
	cases := []struct {
		name string
		in   *Failover
		want *Failover
	}{
		{"no failover stays none", nil, nil},
		{"empty failover gets a consistency", &Failover{}, &Failover{Consistency: ConsistencyAtMostOne}},
		{
			"application section is filled",
			&Failover{Application: &ApplicationFailover{}},
			&Failover{
				Consistency: ConsistencyAtMostOne,
				Application: &ApplicationFailover{
					PurgeMode:          PurgeGracefully,
					TolerationSeconds:  new(int64(300)),
					GracePeriodSeconds: new(int64(600)),
				},
			},
		},
		{
			"cluster section is filled",
			&Failover{Cluster: &ClusterFailover{}},
			&Failover{Consistency: ConsistencyAtMostOne, Cluster: &ClusterFailover{PurgeMode: PurgeDirectly}},
		},
		{
			"explicit values are kept, zero included",
			&Failover{
				Consistency: ConsistencyAtLeastOne,
				Application: &ApplicationFailover{PurgeMode: PurgeNever, TolerationSeconds: new(int64(0)), GracePeriodSeconds: new(int64(0))},
				Cluster:     &ClusterFailover{PurgeMode: PurgeGracefully},
			},
			&Failover{
				Consistency: ConsistencyAtLeastOne,
				Application: &ApplicationFailover{PurgeMode: PurgeNever, TolerationSeconds: new(int64(0)), GracePeriodSeconds: new(int64(0))},
				Cluster:     &ClusterFailover{PurgeMode: PurgeGracefully},
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := &Runnable{Spec: RunnableSpec{Failover: tc.in}}
			r.SetDefaults()
			if !reflect.DeepEqual(r.Spec.Failover, tc.want) {
				t.Fatalf("got %+v, want %+v", r.Spec.Failover, tc.want)
			}
			hash := SpecHash(r.Spec)
			r.SetDefaults()
			if SpecHash(r.Spec) != hash {
				t.Fatal("SetDefaults is not idempotent")
			}
		})
	}
}

func TestDefaultedRunnableIsValid(t *testing.T) {
	r := validRunnable()
	r.Spec.Failover = &Failover{Application: &ApplicationFailover{}, Cluster: &ClusterFailover{}}
	r.SetDefaults()
	checkOneError(t, ValidateRunnable(r, testNow), "")
}

func TestInitialToleration(t *testing.T) {
	for _, tc := range []struct {
		a    ApplicationFailover
		want int64
	}{
		{ApplicationFailover{}, 600},
		{ApplicationFailover{TolerationSeconds: new(int64(3))}, 600},
		{ApplicationFailover{TolerationSeconds: new(int64(900))}, 900},
		{ApplicationFailover{TolerationSeconds: new(int64(900)), InitialTolerationSeconds: new(int64(30))}, 30},
		{ApplicationFailover{InitialTolerationSeconds: new(int64(0))}, 0},
	} {
		if got := tc.a.InitialToleration(); got != tc.want {
			t.Errorf("%+v: %d, want %d", tc.a, got, tc.want)
		}
	}
}
