package codec

import (
	"testing"
	"time"
)

// TestAttemptReplyPlain: only the reply 0, a plain hold taken on a free
// primitive, says Plain; a new hold with a token, a re-entry or a hold
// joined (the array), and a failure do not.
func TestAttemptReplyPlain(t *testing.T) {
	for _, c := range []struct {
		reply           any
		acquired, plain bool
	}{
		{int64(0), true, true},
		{int64(7), true, false},
		{[]any{int64(1), int64(2), "0", "id", int64(100)}, true, false},
		{[]any{int64(1), int64(1), "5", "op", int64(100)}, true, false},
		{[]any{int64(0), int64(-1), "3"}, false, false},
	} {
		r, err := AttemptReply(c.reply, "op", time.Second)
		if err != nil || r.Acquired != c.acquired || r.Plain != c.plain {
			t.Errorf("AttemptReply(%v) = %+v, %v; want Acquired %v, Plain %v", c.reply, r, err, c.acquired, c.plain)
		}
	}
}
