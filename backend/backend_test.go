package backend_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/backend"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestScriptHash(t *testing.T) {
	// sha1("return 1"), as SCRIPT LOAD reports it.
	s := backend.NewScript("return 1")
	if got, want := s.Hash(), "e0e1f9fabfc9d4800c877a703b823ac0578ff8db"; got != want {
		t.Errorf("Hash() = %s, want %s", got, want)
	}
	if s.Source() != "return 1" {
		t.Errorf("Source() = %q", s.Source())
	}
}

func TestIsNoScript(t *testing.T) {
	if !backend.IsNoScript(&backend.ServerError{Message: "NOSCRIPT No matching script. Please use EVAL."}) {
		t.Error("NOSCRIPT reply not recognized")
	}
	for _, err := range []error{nil, errors.New("NOSCRIPT"), &backend.ServerError{Message: "ERR NOSCRIPT"}} {
		if backend.IsNoScript(err) {
			t.Errorf("IsNoScript(%v) = true", err)
		}
	}
}

func TestDecoders(t *testing.T) {
	if n, err := backend.Int(int64(7)); n != 7 || err != nil {
		t.Errorf("Int(7) = %d, %v", n, err)
	}
	if n, err := backend.Int("-12"); n != -12 || err != nil {
		t.Errorf("Int(\"-12\") = %d, %v", n, err)
	}
	if ns, err := backend.Ints([]any{int64(1), "2"}, 2); err != nil || ns[0] != 1 || ns[1] != 2 {
		t.Errorf("Ints = %v, %v", ns, err)
	}
	bad := []func() error{
		func() error { _, err := backend.Int(nil); return err },
		func() error { _, err := backend.Int("1.5"); return err },
		func() error { _, err := backend.String(int64(1)); return err },
		func() error { _, err := backend.String(nil); return err },
		func() error { _, err := backend.Array([]any{int64(1)}, 2); return err },
		func() error { _, err := backend.Ints([]any{int64(1), nil}, 2); return err },
	}
	for i, f := range bad {
		if err := f(); !errors.Is(err, dsync.ErrUnexpectedReply) {
			t.Errorf("case %d: %v, want ErrUnexpectedReply", i, err)
		}
	}
}

func TestMailboxOrder(t *testing.T) {
	ctx := context.Background()
	b := backend.NewMailbox(10)
	for i := 0; i < 10; i++ {
		if !b.Put(backend.Message{Payload: fmt.Sprint(i)}) {
			t.Fatal("Put on an open mailbox failed")
		}
	}
	for i := 0; i < 10; i++ {
		m, err := b.Receive(ctx)
		if err != nil || m.Gap || m.Payload != fmt.Sprint(i) {
			t.Fatalf("message %d: %+v, %v", i, m, err)
		}
	}
}

func TestMailboxOverflowBecomesGap(t *testing.T) {
	ctx := context.Background()
	b := backend.NewMailbox(4)
	for i := 0; i < 5; i++ {
		b.Put(backend.Message{Channel: "c", Payload: fmt.Sprint(i)})
	}
	m, err := b.Receive(ctx)
	if err != nil || !m.Gap || m.Channel != "c" {
		t.Fatalf("after overflow: %+v, %v; want a gap", m, err)
	}
	b.Put(backend.Message{Payload: "next"})
	if m, _ := b.Receive(ctx); m.Payload != "next" {
		t.Fatalf("after the gap: %+v", m)
	}
}

func TestMailboxGapSubsumesQueue(t *testing.T) {
	b := backend.NewMailbox(4)
	b.Put(backend.Message{Payload: "old"})
	b.Put(backend.Message{Gap: true})
	b.Put(backend.Message{Payload: "new"})
	ctx := context.Background()
	if m, _ := b.Receive(ctx); !m.Gap {
		t.Fatalf("first: %+v, want gap", m)
	}
	if m, _ := b.Receive(ctx); m.Payload != "new" {
		t.Fatalf("second: %+v, want new", m)
	}
}

func TestMailboxReceiveWaitsAndCloses(t *testing.T) {
	b := backend.NewMailbox(0)
	got := make(chan error, 3)
	for i := 0; i < 3; i++ {
		go func() {
			_, err := b.Receive(context.Background())
			got <- err
		}()
	}
	b.Put(backend.Message{Payload: "x"})
	if err := <-got; err != nil {
		t.Fatalf("Receive: %v", err)
	}
	b.Close()
	b.Close()
	for i := 0; i < 2; i++ {
		select {
		case err := <-got:
			if !errors.Is(err, dsync.ErrClosed) {
				t.Fatalf("Receive after Close: %v", err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("Close did not wake every receiver")
		}
	}
	if b.Put(backend.Message{}) {
		t.Error("Put on a closed mailbox reported true")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := backend.NewMailbox(1).Receive(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("Receive with cancelled ctx: %v", err)
	}
}

func TestCallKey(t *testing.T) {
	s := backend.NewScript("return 1")
	for _, c := range []struct {
		call backend.Call
		want string
	}{
		{backend.Call{Script: s, Keys: []string{"a", "b"}}, "a"},
		{backend.Call{Script: s}, ""},
		{backend.Call{Command: "SET", Line: []any{"SET", "k", "v", "NX", "PX", int64(5)}}, "k"},
		{backend.Call{Command: "SET", Keys: []string{"k"}, Args: []any{"v"}}, "k"},
		{backend.Call{Command: "PING"}, ""},
	} {
		if got := c.call.Key(); got != c.want {
			t.Errorf("%v.Key() = %q, want %q", c.call.CommandLine(false), got, c.want)
		}
	}
}

func TestSlot(t *testing.T) {
	for key, want := range map[string]int{
		"123456789":            12739, // CRC-16/XMODEM check value 0x31C3
		"foo":                  12182,
		"{user1000}.following": backend.Slot("user1000"),
		"foo{}{bar}":           backend.Slot("foo{}{bar}"),
		"{}":                   backend.Slot("{}"),
		"a{b":                  backend.Slot("a{b"),
	} {
		if got := backend.Slot(key); got != want || got < 0 || got > 16383 {
			t.Errorf("Slot(%q) = %d, want %d", key, got, want)
		}
	}
	if backend.Slot("{x}a") != backend.Slot("{x}b") {
		t.Error("keys with one hash tag in different slots")
	}
}

func TestSlotTable(t *testing.T) {
	reply := []any{
		[]any{int64(0), int64(8191), []any{"127.0.0.1", int64(7001), "id1"}},
		[]any{int64(8192), int64(16383), []any{"127.0.0.1", int64(7002), "id2"}, []any{"127.0.0.1", int64(7003), "id3"}},
	}
	tbl, err := backend.NewSlotTable(reply)
	if err != nil {
		t.Fatal(err)
	}
	if addr, ok := tbl.Master("foo"); !ok || addr != "127.0.0.1:7002" { // slot 12182
		t.Errorf("Master(foo) = %q, %v", addr, ok)
	}
	for i := range 20 {
		key := fmt.Sprint("k", i)
		want := "127.0.0.1:7001"
		if backend.Slot(key) >= 8192 {
			want = "127.0.0.1:7002"
		}
		if addr, ok := tbl.Master(key); !ok || addr != want {
			t.Errorf("Master(%s) = %q, %v; want %s", key, addr, ok, want)
		}
	}
	empty, _ := backend.NewSlotTable([]any{})
	if _, ok := empty.Master("foo"); ok {
		t.Error("an empty table names a master")
	}
	if _, err := backend.NewSlotTable([]any{[]any{int64(0)}}); !errors.Is(err, dsync.ErrUnexpectedReply) {
		t.Errorf("a short entry: %v", err)
	}
}

func TestArgStrings(t *testing.T) {
	got, err := backend.ArgStrings([]any{"s", []byte("b"), 7, int64(-8)})
	if err != nil || fmt.Sprint(got) != "[s b 7 -8]" {
		t.Errorf("ArgStrings = %q, %v", got, err)
	}
	if _, err := backend.ArgStrings([]any{1.5}); err == nil {
		t.Error("ArgStrings accepted a float64")
	}
	got, err = backend.AppendArgStrings([]string{"EVALSHA"}, []any{"k", 30000})
	if err != nil || fmt.Sprint(got) != "[EVALSHA k 30000]" {
		t.Errorf("AppendArgStrings = %q, %v", got, err)
	}
	// What the rueidis adapter counts on: a buffer on the caller's stack
	// and strings alone cost no allocation.
	args := []any{"owner", "op", "id"}
	if n := testing.AllocsPerRun(100, func() {
		var buf [4]string
		if out, err := backend.AppendArgStrings(buf[:0], args); err != nil || len(out) != 3 {
			t.Fatalf("%d strings, %v", len(out), err)
		}
	}); n != 0 {
		t.Errorf("AppendArgStrings into a stack buffer: %v allocations, want 0", n)
	}
}

func TestNormalizeReply(t *testing.T) {
	type clientError string
	serverError := func(v any) (string, bool) {
		e, ok := v.(clientError)
		return string(e), ok
	}
	got, err := backend.NormalizeReply([]any{nil, []byte("b"), []byte(nil), []byte{}, true, false, 2.9, clientError("ERR x"),
		map[string]any{"z": int64(1), "a": "2"}}, serverError)
	want := []any{nil, "b", nil, "", int64(1), nil, int64(2), &backend.ServerError{Message: "ERR x"}, []any{"a", "2", "z", int64(1)}}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("NormalizeReply = %#v, %v; want %#v", got, err, want)
	}
	if _, err := backend.NormalizeReply(struct{}{}, serverError); !errors.Is(err, dsync.ErrUnexpectedReply) {
		t.Errorf("NormalizeReply(struct{}{}): %v, want ErrUnexpectedReply", err)
	}
}

func TestTransportError(t *testing.T) {
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	past := backend.DeadlineContext(context.Background(), time.Now().Add(-time.Millisecond))
	future := backend.DeadlineContext(context.Background(), time.Now().Add(time.Hour))
	own := fmt.Errorf("client: %w", context.DeadlineExceeded) // a bound of the adapter's own
	for _, c := range []struct {
		name     string
		ctx      context.Context
		err      error
		matches  []error
		excludes []error
	}{
		{"ctx cancelled", cancelled, io.EOF, []error{context.Canceled, io.EOF}, nil},
		{"ctx cancelled, its error", cancelled, context.Canceled, []error{context.Canceled}, nil},
		{"deadline passed, no Done", past, io.EOF, []error{context.DeadlineExceeded, io.EOF}, nil},
		{"own timeout, no deadline", context.Background(), own, nil, []error{context.DeadlineExceeded}},
		{"own timeout, deadline ahead", future, own, nil, []error{context.DeadlineExceeded}},
		{"another call's cancellation", context.Background(), context.Canceled, nil, []error{context.Canceled}},
		{"transport error", context.Background(), io.EOF, []error{io.EOF}, []error{context.DeadlineExceeded, context.Canceled}},
	} {
		err := backend.TransportError(c.ctx, "adapter: EVALSHA", c.err)
		if !strings.HasPrefix(err.Error(), "adapter: EVALSHA: ") || !strings.Contains(err.Error(), c.err.Error()) {
			t.Errorf("%s: %q lacks the prefix or the cause", c.name, err)
		}
		for _, target := range c.matches {
			if !errors.Is(err, target) {
				t.Errorf("%s: %v does not match %v", c.name, err, target)
			}
		}
		for _, target := range c.excludes {
			if errors.Is(err, target) {
				t.Errorf("%s: %v matches %v", c.name, err, target)
			}
		}
	}
}

// A client whose errors already name it (redigo's read "redigo: ...") is
// not named twice.
func TestTransportErrorNamesTheClientOnce(t *testing.T) {
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	exhausted := errors.New("redigo: connection pool exhausted")
	for _, c := range []struct {
		ctx  context.Context
		want string
	}{
		{context.Background(), "redigo: connection pool exhausted"},
		{cancelled, "redigo: context canceled (redigo: connection pool exhausted)"},
	} {
		err := backend.TransportError(c.ctx, "redigo", exhausted)
		if err.Error() != c.want || !errors.Is(err, exhausted) {
			t.Errorf("TransportError(%v) = %q; want %q, matching the cause", c.ctx, err, c.want)
		}
	}
}

// A nil err, a round trip that did not fail, is no error, whatever ctx:
// an adapter may pass on what its client returned.
func TestTransportErrorNil(t *testing.T) {
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	for _, ctx := range []context.Context{context.Background(), cancelled} {
		func() {
			defer func() {
				if p := recover(); p != nil {
					t.Errorf("TransportError(%v, nil) panicked: %v", ctx, p)
				}
			}()
			if err := backend.TransportError(ctx, "redigo", nil); err != nil {
				t.Errorf("TransportError(%v, nil) = %q; want nil", ctx, err)
			}
		}()
	}
}

// An array reply is normalized in place and comes back as the value it
// came as: a script's array reply costs no allocation of its own.
func TestNormalizeReplyArrayInPlace(t *testing.T) {
	serverError := func(any) (string, bool) { return "", false }
	reply := []any{int64(0), "id", []any{int64(1), nil}}
	var in any = reply
	var got any
	n := testing.AllocsPerRun(100, func() {
		var err error
		if got, err = backend.NormalizeReply(in, serverError); err != nil {
			t.Fatal(err)
		}
	})
	if n != 0 {
		t.Errorf("NormalizeReply of an array: %.1f allocations; want 0", n)
	}
	if s, ok := got.([]any); !ok || len(s) != 3 || &s[0] != &reply[0] {
		t.Errorf("NormalizeReply returned %#v; want the array it was given", got)
	}
}
