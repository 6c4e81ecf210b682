package script_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/dsyncgo/dsync/internal/codec"
	"github.com/dsyncgo/dsync/internal/script"
	"github.com/dsyncgo/dsync/internal/testserver"
)

// readHeader returns the header as codec.lua's header reads it.
var readHeader = script.New(`local a = header()
local registered = '0'
if a.registered then
  registered = '1'
end
return {a.owner, a.op, a.id, a.plain, a.lease, a.channel, a.hub, a.entry, a.entry_ttl, registered, a.fence_ttl}
`)

// The header's two halves agree: what codec.Header sends, field by field,
// is what the Lua header reads under the same name.
func TestHeaderReadsWhatTheGoHeaderSends(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	b := testserver.Real(t).NewBackend(t)
	for _, c := range []struct {
		h    codec.Header
		want []any // in the order of readHeader's reply, by name
	}{
		{codec.Header{Owner: "o", Op: "p", HoldID: "i", Plain: "o i", Lease: "30000", Channel: "c", Hub: "h",
			Entry: "h/p|30000|o", EntryTTL: "5000", Registered: true, FenceTTL: "60000"},
			[]any{"o", "p", "i", "o i", "30000", "c", "h", "h/p|30000|o", "5000", "1", "60000"}},
		{codec.Header{}, []any{"", "", "", "", "0", "", "", "", "0", "0", "0"}},
	} {
		v, err := b.Eval(ctx, readHeader, nil, c.h.Append(nil)...)
		if err != nil {
			t.Fatal(err)
		}
		if got, _ := v.([]any); !slices.Equal(got, c.want) {
			t.Errorf("header %+v read as %q; want %q", c.h, v, c.want)
		}
	}
}
