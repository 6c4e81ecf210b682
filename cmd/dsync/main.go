// Command dsync demonstrates and measures dsync's primitives.
//
// Usage:
//
//	dsync demo  [-redis host:port] [-workers n] [-rounds n] [-hold d]
//	dsync inspect -redis host:port [-prefix p] name
//	dsync bench [flags]
//
// demo runs on an embedded server unless -redis names a real one.
package main

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/dsyncgo/dsync/bench"
)

// out receives the commands' reports; tests capture it.
var out io.Writer = os.Stdout

func usage() {
	fmt.Fprint(os.Stderr, `usage:
  dsync demo    [-redis host:port] [-workers n] [-rounds n] [-hold d]
  dsync inspect -redis host:port [-prefix p] name
  dsync bench   [-redis host:port] [flags]   (see dsync bench -h)
`)
	os.Exit(2)
}

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	var err error
	switch os.Args[1] {
	case "demo":
		err = demo(os.Args[2:])
	case "inspect":
		err = inspect(os.Args[2:])
	case "bench":
		err = runBench(os.Args[2:])
	case benchWorker: // started by bench, one per contender
		err = bench.Worker(context.Background(), os.Stdin, os.Stdout)
	case "-h", "-help", "--help", "help":
		usage()
	default:
		fmt.Fprintf(os.Stderr, "dsync: unknown command %q\n", os.Args[1])
		usage()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "dsync:", err)
		os.Exit(1)
	}
}
