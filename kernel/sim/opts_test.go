package sim

import "github.com/forkfuzz/forkfuzz/agents/executor"

var execOpts = executor.Options{}
