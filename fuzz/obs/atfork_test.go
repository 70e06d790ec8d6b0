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

// TestCountOverlapMoves counts the migrateloop passes that intersect the
// fork call, and the pages they moved.
func TestCountOverlapMoves(t *testing.T) {
	mv := func(inv, resp uint64, pages int) TimedMove { return TimedMove{Inv: inv, Resp: resp, Pages: pages} }
	for _, tc := range []struct {
		name  string
		moves []TimedMove
		want  Overlap
	}{
		{"none", nil, Overlap{Ticks: 100}},
		{"before and after", []TimedMove{mv(10, 99, 64), mv(201, 300, 64)}, Overlap{Ticks: 100}},
		{"across and inside", []TimedMove{mv(50, 150, 64), mv(150, 160, 3), mv(190, 400, 0), mv(401, 500, 64)},
			Overlap{Ticks: 100, MovePasses: 3, Moved: 67}},
		{"at the edges", []TimedMove{mv(10, 100, 1), mv(200, 300, 2)}, Overlap{Ticks: 100, MovePasses: 2, Moved: 3}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := CountOverlap([]ThreadLog{{Thread: 2, Moves: tc.moves}}, 100, 200)
			if got != tc.want {
				t.Errorf("CountOverlap = %+v, want %+v", got, tc.want)
			}
		})
	}
}
