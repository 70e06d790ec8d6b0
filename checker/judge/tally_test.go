package judge

import (
	"fmt"
	"reflect"
	"testing"
)

// perFork are fields of the per-fork obs.Overlap that a sum of forks
// does not carry (AtFork counts writer, idle and mover forks instead).
var perFork = map[string]bool{
	"Tally.AtFork.Overlap.Ticks": true, "Tally.AtFork.Overlap.Idle": true,
	"Tally.AtFork.Overlap.Writers": true, "Tally.AtFork.Overlap.Movers": true,
	// obs.ForkPages.Add keeps a sum's Fork and Err, and ors Flags.
	"Tally.AtFork.Pages.Fork": true, "Tally.AtFork.Pages.Err": true, "Tally.AtFork.Pages.Flags": true,
}

// fill sets every number in v (structs and map[string]int values
// included) to a distinct non-zero value.
func fill(v reflect.Value, next *int64, path string, t *testing.T) {
	if perFork[path] {
		return
	}
	switch v.Kind() {
	case reflect.Struct:
		for i := 0; i < v.NumField(); i++ {
			if v.Type().Field(i).IsExported() {
				fill(v.Field(i), next, path+"."+v.Type().Field(i).Name, t)
			}
		}
	case reflect.Int, reflect.Int64, reflect.Int32:
		*next++
		v.SetInt(*next)
	case reflect.Uint, reflect.Uint64, reflect.Uint32:
		*next++
		v.SetUint(uint64(*next))
	case reflect.Map:
		m := reflect.MakeMap(v.Type())
		*next++
		val := reflect.New(v.Type().Elem()).Elem()
		fill(val, next, path+"[k]", t)
		m.SetMapIndex(reflect.ValueOf("k"), val)
		v.Set(m)
	default:
		t.Fatalf("%s: a %s field: teach this test (and Tally.Merge) about it", path, v.Kind())
	}
}

// leaves lists every number in v by path.
func leaves(v reflect.Value, path string, out map[string]int64) {
	if perFork[path] {
		return
	}
	switch v.Kind() {
	case reflect.Struct:
		for i := 0; i < v.NumField(); i++ {
			if v.Type().Field(i).IsExported() {
				leaves(v.Field(i), path+"."+v.Type().Field(i).Name, out)
			}
		}
	case reflect.Int, reflect.Int64, reflect.Int32:
		out[path] = v.Int()
	case reflect.Uint, reflect.Uint64, reflect.Uint32:
		out[path] = int64(v.Uint())
	case reflect.Map:
		for _, k := range v.MapKeys() {
			leaves(v.MapIndex(k), fmt.Sprintf("%s[%v]", path, k), out)
		}
	}
}

// Every field of a Tally survives Merge: the gate merged the campaign's
// tally field by field and dropped skipped ops, unjudged runs, notes and
// the at-fork evidence from its JSON. A field added to Tally (or to the
// structs it holds) that Merge forgets fails here.
func TestTallyMergeEveryField(t *testing.T) {
	var u Tally
	var n int64
	fill(reflect.ValueOf(&u).Elem(), &n, "Tally", t)
	var sum Tally
	sum.Merge(u)
	sum.Merge(u)
	want, got := map[string]int64{}, map[string]int64{}
	leaves(reflect.ValueOf(u), "Tally", want)
	leaves(reflect.ValueOf(sum), "Tally", got)
	if len(want) < 20 {
		t.Fatalf("only %d fields filled: the walk is broken", len(want))
	}
	for p, w := range want {
		if got[p] != 2*w {
			t.Errorf("%s: merged twice = %d, want %d", p, got[p], 2*w)
		}
	}
}
