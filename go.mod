module github.com/forkfuzz/forkfuzz

go 1.26.8
