// Command agentbin is a guest agent with only what runs inside a VM (the
// "vm-agent" and "executor" subcommands of forkfuzz), for the agents/vm
// tests: they boot it instead of the whole forkfuzz binary, so they do not
// depend on every package of the CLI. Build it with CGO_ENABLED=0.
package main

import (
	"fmt"
	"os"

	"github.com/forkfuzz/forkfuzz/agents/executor"
	"github.com/forkfuzz/forkfuzz/agents/vm"
)

func main() {
	if len(os.Args) > 1 {
		switch os.Args[1] {
		case "vm-agent":
			fmt.Fprintln(os.Stderr, "vm-agent:", vm.AgentMain(os.Args[2:]))
			os.Exit(2)
		case "executor":
			executor.Serve()
		case "help":
			fmt.Println("usage: agentbin vm-agent|executor|help")
			os.Exit(0)
		}
	}
	fmt.Fprintln(os.Stderr, "usage: agentbin vm-agent|executor")
	os.Exit(2)
}
