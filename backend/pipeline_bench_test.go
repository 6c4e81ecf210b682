package backend_test

import (
	"context"
	"testing"
	"time"

	"github.com/dsyncgo/dsync/backend"
)

// BenchmarkPipelineLoneCaller measures what the Pipeline adds to a lone
// call, on a client that answers at once: the client's own cost ("client"),
// and a call through the Pipeline with each kind of context, beside the
// path of a cancellable context without a Pipeline (backend.Calls).
func BenchmarkPipelineLoneCaller(b *testing.B) {
	reply := any("r")
	send := func(ctx context.Context, c backend.Call) (any, error) { return reply, nil }
	p := backend.NewPipeline(backend.PipelineConfig{
		Send: send, Honours: true,
		Batch: func(ctx context.Context, calls []backend.Call, source bool) ([]backend.Result, error) {
			panic("a lone call batched")
		},
	})
	defer p.Close()
	c := backend.Call{Script: echoScript, Args: []any{"x"}}
	bg := context.Background()
	deadline := backend.DeadlineContext(bg, time.Now().Add(time.Hour))
	cancellable, cancel := context.WithCancel(bg)
	defer cancel()
	run := func(name string, fn func()) {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				fn()
			}
		})
	}
	run("client", func() { send(deadline, c) })
	run("ctx=deadline", func() { p.Do(deadline, c) })
	run("ctx=background", func() { p.Do(bg, c) })
	run("ctx=cancellable", func() { p.Do(cancellable, c) })
	var calls backend.Calls
	defer calls.Close()
	run("ctx=cancellable/without-pipeline", func() {
		calls.Do(cancellable, func(ctx context.Context) (any, error) { return send(ctx, c) })
	})
}
