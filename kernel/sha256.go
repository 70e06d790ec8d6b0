package kernel

import (
	"crypto/sha256"
	"encoding/hex"
	"io"

	"github.com/forkfuzz/forkfuzz/internal/fsutil"
)

// FileSHA256 is the hex SHA-256 of a file's content (a kernel image's
// identity in findings and in distributed campaigns' object store). It
// must be a regular file of at most MaxImageFile bytes: a FIFO or a
// device would be hashed forever.
func FileSHA256(path string) (string, error) {
	f, err := fsutil.OpenRegular(path, MaxImageFile)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, io.LimitReader(f, MaxImageFile+1)); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
