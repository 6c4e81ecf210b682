package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"time"

	"github.com/dsyncgo/dsync/internal/keys"
	"github.com/dsyncgo/dsync/mutex"
)

// inspect prints the state of a mutex on a server.
func inspect(args []string) error {
	fs := flag.NewFlagSet("inspect", flag.ExitOnError)
	addr := fs.String("redis", "", "address of the Redis server (required)")
	prefix := fs.String("prefix", keys.DefaultPrefix, "key prefix")
	fs.Parse(args)
	if *addr == "" || fs.NArg() != 1 {
		return errors.New("inspect: need -redis host:port and one mutex name")
	}
	srv, err := openServer(*addr)
	if err != nil {
		return err
	}
	c := srv.client()
	defer c.close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	st, err := mutex.New(c.b, fs.Arg(0), mutex.WithPrefix(*prefix)).State(ctx)
	if err != nil {
		return err
	}
	if !st.Locked {
		fmt.Fprintf(out, "mutex %q: free\n", fs.Arg(0))
		return nil
	}
	ttl := "no expiry"
	if st.TTL >= 0 {
		ttl = st.TTL.String() + " left on its lease"
	}
	fmt.Fprintf(out, "mutex %q: locked, %s\n", fs.Arg(0), ttl)
	return nil
}
