// Package hosttest runs programs on the host kernel through the real
// executor and checks the observations with package checker: the model
// must accept every observation of a correct kernel (zero false
// positives). The tests need Linux and enough privilege for mlock.
package hosttest

import (
	"os"
	"testing"

	"github.com/forkfuzz/forkfuzz/agents/executor"
)

// TestMain re-executes the test binary with the GODEBUG setting the
// executor needs.
func TestMain(m *testing.M) {
	if err := executor.ReexecWithGODEBUG(); err != nil {
		panic(err)
	}
	os.Exit(m.Run())
}
