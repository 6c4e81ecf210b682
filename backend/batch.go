package backend

import "context"

// PipelineBatch implements Batcher.EvalBatch for an adapter whose client
// pipelines: pipeline sends calls at once, each with EVALSHA, or with EVAL
// when source is true, and returns one Result per call, in order, or an
// error for the whole batch (a transport error, ctx done), after which no
// result is trusted. The calls that met NOSCRIPT are sent again with their
// source, so that a flushed script cache is invisible, as in Eval.
//
// A Result holds the call's reply, normalized (NormalizeReply), or its
// error reply as a *ServerError in Err, NOSCRIPT included. An error reply
// is one call's failure, never the batch's: pipeline reads every reply
// after it. A client that reports a pipeline's first error reply as the
// pipeline's error (radix v4) must be given a receiver per call that keeps
// its error reply as a value.
func PipelineBatch(ctx context.Context, calls []Call, pipeline func(ctx context.Context, calls []Call, source bool) ([]Result, error)) ([]Result, error) {
	if len(calls) == 0 {
		return nil, nil
	}
	results, err := pipeline(ctx, calls, false)
	if err != nil {
		return nil, err
	}
	var again []int
	for i, r := range results {
		if IsNoScript(r.Err) {
			again = append(again, i)
		}
	}
	if len(again) == 0 {
		return results, nil
	}
	retry := make([]Call, len(again))
	for j, i := range again {
		retry[j] = calls[i]
	}
	retried, err := pipeline(ctx, retry, true)
	if err != nil {
		return nil, err
	}
	for j, i := range again {
		results[i] = retried[j]
	}
	return results, nil
}
