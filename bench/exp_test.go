package bench

import (
	"context"
	"github.com/gomodule/redigo/redis"
	"testing"
	"time"

	"github.com/dsyncgo/dsync/backend"
	bredigo "github.com/dsyncgo/dsync/backend/redigo"
)

func BenchmarkExpEval(b *testing.B) {
	a := addr(b)
	var c counter
	pool := redigoPool(a, &c)
	be := bredigo.New(pool)
	defer be.Close()
	s := backend.NewScript("return 1")
	ctx := context.Background()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		be.Eval(ctx, s, []string{"k"}, "a")
		be.Eval(ctx, s, []string{"k"}, "a")
	}
}

func BenchmarkExpRawDo(b *testing.B) {
	a := addr(b)
	var c counter
	pool := redigoPool(a, &c)
	defer pool.Close()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		conn := pool.Get()
		conn.Do("SET", "k", "v", "NX", "PX", 1000)
		conn.Close()
		conn = pool.Get()
		conn.Do("DEL", "k")
		conn.Close()
	}
}

func BenchmarkExpEvalCtx(b *testing.B) {
	a := addr(b)
	var c counter
	pool := redigoPool(a, &c)
	be := bredigo.New(pool)
	defer be.Close()
	s := backend.NewScript("return 1")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		be.Eval(ctx, s, []string{"k"}, "a")
		be.Eval(ctx, s, []string{"k"}, "a")
	}
}

func BenchmarkExpRawDoGo(b *testing.B) {
	a := addr(b)
	var c counter
	pool := redigoPool(a, &c)
	defer pool.Close()
	do := func(cmd string, args ...any) {
		done := make(chan struct{})
		go func() {
			conn := pool.Get()
			conn.Do(cmd, args...)
			conn.Close()
			close(done)
		}()
		<-done
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		do("SET", "k", "v", "NX", "PX", 1000)
		do("DEL", "k")
	}
}

func TestExpColdRTT(t *testing.T) {
	c, _ := redis.Dial("tcp", "127.0.0.1:7777")
	defer c.Close()
	var hot, cold []time.Duration
	for i := 0; i < 50; i++ {
		time.Sleep(20 * time.Millisecond)
		s := time.Now()
		c.Do("PING")
		cold = append(cold, time.Since(s))
		s = time.Now()
		c.Do("PING")
		hot = append(hot, time.Since(s))
	}
	t.Logf("cold median %v p90 %v; hot median %v", percentile(sorted(cold), 0.5), percentile(sorted(cold), 0.9), percentile(sorted(hot), 0.5))
}

func TestExpPubSubLatency(t *testing.T) {
	var c counter
	p1, p2 := redigoPool("127.0.0.1:7777", &c), redigoPool("127.0.0.1:7777", &c)
	b1, b2 := bredigo.New(p1), bredigo.New(p2)
	defer b1.Close()
	defer b2.Close()
	ctx := context.Background()
	sub, err := b1.Subscribe(ctx, "expch")
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	pub := backend.NewScript("return redis.call('PUBLISH', ARGV[1], ARGV[2])")
	s := backend.NewScript("return 1")
	var pubRet, recv, evalAfter []time.Duration
	for i := 0; i < 50; i++ {
		time.Sleep(20 * time.Millisecond)
		start := time.Now()
		got := make(chan time.Time, 1)
		go func() {
			sub.Receive(ctx)
			got <- time.Now()
			b1.Eval(ctx, s, nil)
			got <- time.Now()
		}()
		time.Sleep(5 * time.Millisecond)
		start = time.Now()
		b2.Eval(ctx, pub, nil, "expch", "x")
		pubRet = append(pubRet, time.Since(start))
		r := <-got
		recv = append(recv, r.Sub(start))
		e := <-got
		evalAfter = append(evalAfter, e.Sub(start))
	}
	t.Logf("publish returns %v, message received %v, waiter's eval done %v (medians)", percentile(sorted(pubRet), .5), percentile(sorted(recv), .5), percentile(sorted(evalAfter), .5))
}
