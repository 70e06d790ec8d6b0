package gen

import "math/rand/v2"

// pick returns an index into ws chosen with probability ws[i]/sum, or
// uniformly when no weight is positive. Negative weights count as zero.
func pick(r *rand.Rand, ws []int) int {
	total := sum(ws)
	if total == 0 {
		return r.IntN(len(ws))
	}
	n := r.IntN(total)
	for i, w := range ws {
		if w <= 0 {
			continue
		}
		if n < w {
			return i
		}
		n -= w
	}
	return len(ws) - 1
}

func chance(r *rand.Rand, p float64) bool { return r.Float64() < p }

// between returns a uniform integer in [lo, hi] (lo if hi < lo).
func between(r *rand.Rand, lo, hi int) int {
	if hi <= lo {
		return lo
	}
	return lo + r.IntN(hi-lo+1)
}

// oneOf returns a uniformly chosen element of xs.
func oneOf[T any](r *rand.Rand, xs ...T) T { return xs[r.IntN(len(xs))] }

// sum returns the total of the positive weights in ws.
func sum(ws []int) int {
	s := 0
	for _, w := range ws {
		s += max(w, 0)
	}
	return s
}
