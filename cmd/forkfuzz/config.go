package main

import "errors"

// fieldMsg is a config package's *FieldError (agents/vm, agents/sim,
// campaign, campaign/gate, campaign/dist): the Config field whose value
// its Validate rejected, and the rest of the message.
type fieldMsg interface {
	error
	FieldMsg() (field, msg string)
}

// flagError words err, a config's *FieldError, with the flag that sets
// the field (flags maps Config fields to flag names): "VMs 0: want at
// least 1" becomes "--vms 0: want at least 1". Other errors, and fields
// without a flag, are returned as they are.
func flagError(err error, flags map[string]string) error {
	var fe fieldMsg
	if errors.As(err, &fe) {
		field, msg := fe.FieldMsg()
		if f, ok := flags[field]; ok {
			return errors.New(flagName(f) + msg)
		}
	}
	return err
}
