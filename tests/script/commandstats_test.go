package script_test

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/gomodule/redigo/redis"

	"github.com/dsyncgo/dsync/internal/testserver"
)

// calls returns how many times the server ran command, scripts' calls
// included.
func calls(t *testing.T, srv *testserver.Server, command string) int64 {
	t.Helper()
	v, err := redis.String(srv.Do(context.Background(), "INFO", "commandstats"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(v, "\n") {
		if rest, ok := strings.CutPrefix(line, "cmdstat_"+command+":calls="); ok {
			n, _, _ := strings.Cut(rest, ",")
			c, err := strconv.ParseInt(n, 10, 64)
			if err != nil {
				t.Fatalf("commandstats line %q", line)
			}
			return c
		}
	}
	return 0
}
