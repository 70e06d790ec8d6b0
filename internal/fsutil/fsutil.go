// Package fsutil reads files that come from users (flags, workdirs, config
// files) with bounds: a file where a regular file is expected must be one
// (a FIFO would block forever, /dev/zero never ends, a directory is a
// mistake), and no larger than a limit the caller names, so a huge or
// endless input ends in a clear error instead of gigabytes of memory and
// a process that ignores SIGTERM while it reads.
package fsutil

import (
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
	"syscall"
)

// NotRegularError says that a path is not a regular file.
type NotRegularError struct {
	Path string
	Mode fs.FileMode
}

func (e *NotRegularError) Error() string {
	return fmt.Sprintf("%s is %s, want a regular file", e.Path, Kind(e.Mode))
}

// TooLargeError says that a file is larger than the reader's limit.
type TooLargeError struct {
	Path string
	Size int64 // the size at stat; -1: it grew past Max while read
	Max  int64
}

func (e *TooLargeError) Error() string {
	if e.Size < 0 {
		return fmt.Sprintf("%s grew past the %s limit for this file while read", e.Path, Size(e.Max))
	}
	size, max := Size(e.Size), Size(e.Max)
	if size == max { // rounded alike: say the bytes
		size, max = fmt.Sprintf("%d bytes", e.Size), fmt.Sprintf("%d bytes", e.Max)
	}
	return fmt.Sprintf("%s is %s, larger than the %s limit for this file", e.Path, size, max)
}

// Kind names the type of a file mode ("a FIFO", "a directory", ...).
func Kind(m fs.FileMode) string {
	switch {
	case m.IsRegular():
		return "a regular file"
	case m.IsDir():
		return "a directory"
	case m&fs.ModeNamedPipe != 0:
		return "a FIFO"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a block device"
	case m&fs.ModeSymlink != 0:
		return "a symbolic link"
	}
	return "not a regular file"
}

// Size prints a byte count for people, rounded to a tenth: "512 MiB",
// "1.5 KiB", "17 bytes".
func Size(n int64) string {
	units := []string{"KiB", "MiB", "GiB", "TiB"}
	if n < 1024 {
		return fmt.Sprintf("%d bytes", n)
	}
	f, u := float64(n)/1024, 0
	for f >= 1024 && u < len(units)-1 {
		f /= 1024
		u++
	}
	return strings.TrimSuffix(fmt.Sprintf("%.1f", f), ".0") + " " + units[u]
}

// CheckRegular returns an error unless path (symbolic links followed) is
// a regular file of at most max bytes. It is for files handed to code
// that reads them itself (a TLS library); read with ReadFileLimited when
// possible, which checks again on the opened file.
func CheckRegular(path string, max int64) error {
	fi, err := os.Stat(path)
	if err != nil {
		return err
	}
	return check(path, fi, max)
}

func check(path string, fi fs.FileInfo, max int64) error {
	if !fi.Mode().IsRegular() {
		return &NotRegularError{Path: path, Mode: fi.Mode()}
	}
	if fi.Size() > max {
		return &TooLargeError{Path: path, Size: fi.Size(), Max: max}
	}
	return nil
}

// OpenRegular opens the regular file at path (symbolic links followed)
// for reading, with the checks of ReadFileLimited: not a regular file, or
// larger than max, is an error. The file is opened non-blocking and
// checked again on the descriptor, so a FIFO put in place between the
// stat and the open cannot block it. Read it through io.LimitReader when
// a bound matters: it may grow.
func OpenRegular(path string, max int64) (*os.File, error) {
	if err := CheckRegular(path, max); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err == nil {
		err = check(path, fi, max)
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// ReadFileLimited reads the regular file at path (symbolic links
// followed), at most max bytes. A FIFO, device, socket or directory is a
// *NotRegularError; a file larger than max, at stat or while read (it may
// grow), a *TooLargeError. A missing file is the *fs.PathError of
// os.Stat (errors.Is(err, fs.ErrNotExist)).
func ReadFileLimited(path string, max int64) ([]byte, error) {
	f, err := OpenRegular(path, max)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	// Sized for the file as it stands (bytes.MinRead spare to see EOF),
	// not doubled on the way as io.ReadAll would.
	buf := bytes.NewBuffer(make([]byte, 0, fi.Size()+bytes.MinRead))
	if _, err := buf.ReadFrom(io.LimitReader(f, max+1)); err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	b := buf.Bytes()
	if int64(len(b)) > max {
		return nil, &TooLargeError{Path: path, Size: -1, Max: max}
	}
	return b, nil
}
