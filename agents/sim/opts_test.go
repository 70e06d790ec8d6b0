package sim

import "github.com/forkfuzz/forkfuzz/agents"

var execOpts = agents.Options{}
