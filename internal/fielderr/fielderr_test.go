package fielderr

import (
	"errors"
	"fmt"
	"testing"
)

func TestFieldError(t *testing.T) {
	for _, c := range []struct {
		e    FieldError
		want string
	}{
		{FieldError{"Budget", " must be positive, got 0s"}, "Budget must be positive, got 0s"},
		{FieldError{"Profile", ": unknown profile \"x\""}, "Profile: unknown profile \"x\""},
	} {
		err := fmt.Errorf("config: %w", &c.e)
		if err.Error() != "config: "+c.want {
			t.Errorf("%q", err.Error())
		}
		var fe *FieldError
		if !errors.As(err, &fe) {
			t.Fatal("errors.As")
		}
		if f, m := fe.FieldMsg(); f != c.e.Field || m != c.e.Msg {
			t.Errorf("FieldMsg = %q, %q", f, m)
		}
	}
}
