package corpus

import (
	"os"
	"path/filepath"
	"testing"
)

// The embedded regression files are the files of corpus/regress and
// corpus/rollback, byte for byte.
func TestRegressionFilesEmbedded(t *testing.T) {
	for _, dir := range RegressionDirs {
		files := RegressionFiles(dir)
		disk, _ := filepath.Glob(filepath.Join(dir, "*"+Ext))
		if len(files) == 0 || len(files) != len(disk) {
			t.Fatalf("%s: %d embedded files, %d on disk", dir, len(files), len(disk))
		}
		for _, f := range files {
			b, err := os.ReadFile(filepath.Join(dir, f.Name))
			if err != nil || string(b) != string(f.Text) {
				t.Errorf("%s/%s differs from the disk: %v", dir, f.Name, err)
			}
		}
	}
}
