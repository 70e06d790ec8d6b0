package bad

import (
	"fmt"
	"log"
	"reflect"
	"sort"
	"strings"
)

//forkfuzz:childsafe
func hostCalls(m *machine, s []int) {
	_ = fmt.Sprint() // want: host-package
	sort.Ints(s)     // want: host-package
	var b strings.Builder
	b.WriteByte('x')        // want: host-package interface
	log.SetPrefix("x")      // want: host-package
	_ = reflect.TypeOf(nil) // want: host-package interface
}
