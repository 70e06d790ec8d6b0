package obs

import "testing"

func TestCountOverlap(t *testing.T) {
	st := func(inv, resp uint64) TimedStore { return TimedStore{Inv: inv, Resp: resp} }
	for _, tc := range []struct {
		name   string
		stores []TimedStore
		want   Overlap
	}{
		{"none", nil, Overlap{Ticks: 100}},
		{"inside and around", []TimedStore{st(10, 20), st(110, 120), st(150, 250), st(190, 210), st(300, 310)},
			Overlap{Stores: 3, Inside: 1, Blocked: 2, Ticks: 100}},
		{"blocked across", []TimedStore{st(50, 300)}, Overlap{Stores: 1, Blocked: 1, Ticks: 100}},
		{"idle around", []TimedStore{st(10, 20), st(600, 610)}, Overlap{Ticks: 100, Idle: 480}},
		{"busy up to it", []TimedStore{st(90, 99), st(201, 210)}, Overlap{Ticks: 100, Idle: 2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := CountOverlap([]ThreadLog{{Thread: 1, Stores: tc.stores}}, 100, 200)
			if got != tc.want {
				t.Errorf("CountOverlap = %+v, want %+v", got, tc.want)
			}
		})
	}
}
