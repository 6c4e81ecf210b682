package dsync_test

import (
	"context"
	"fmt"

	"github.com/dsyncgo/dsync"
)

// An owner is a request, a job: every acquisition made with its context,
// or a context derived from it, belongs to it and re-enters when nested.
func ExampleWithOwner() {
	request := dsync.WithOwner(context.Background())
	nested, cancel := context.WithCancel(request) // derived: the same owner
	defer cancel()
	other := dsync.WithOwner(context.Background())

	a, _ := dsync.OwnerFrom(request)
	b, _ := dsync.OwnerFrom(nested)
	c, _ := dsync.OwnerFrom(other)
	_, none := dsync.OwnerFrom(context.Background())
	fmt.Println(a == b, a == c, len(a), none)
	// Output: true false 32 false
}
