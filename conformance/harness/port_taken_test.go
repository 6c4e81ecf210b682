package harness_test

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/dsyncgo/dsync/conformance/harness"
)

// A node started on a port where another server answers fails to start,
// and stays down: it does not take the other for itself, which a test
// would then kill as if it were the node (a RedLock test once found two
// of its five servers on one port, and three down after killing two).
func TestStartOnAPortTakenFails(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s := harness.Standalone(t)
	n := s.Node()
	n.Kill()

	other := exec.Command("redis-server", "--port", n.Port(), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no")
	if err := other.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		other.Process.Kill()
		other.Wait()
	})
	for i := 0; ; i++ {
		if _, err := n.Do(ctx, "PING"); err == nil {
			break
		} else if i == 500 {
			t.Fatalf("the other server on port %s does not answer: %v", n.Port(), err)
		}
		time.Sleep(10 * time.Millisecond)
	}

	err := n.Start(ctx)
	if err == nil || !strings.Contains(err.Error(), "another server answers on the port") {
		t.Fatalf("Start on a port another server answers on = %v, want an error saying so", err)
	}
	if n.Up() {
		t.Fatal("the node is up after a start that failed")
	}
	if _, err := n.Do(ctx, "PING"); err != nil {
		t.Fatalf("the other server stopped answering: %v", err)
	}
}
