module github.com/dsyncgo/dsync/cmd/dsync

go 1.26.0

require (
	github.com/alicebob/miniredis/v2 v2.40.0
	github.com/dsyncgo/dsync v0.0.0
	github.com/dsyncgo/dsync/backend/goredis v0.0.0
	github.com/dsyncgo/dsync/bench v0.0.0
	github.com/dsyncgo/dsync/otel v0.0.0
	github.com/gomodule/redigo v1.9.3
	github.com/redis/go-redis/v9 v9.23.0
	go.opentelemetry.io/otel v1.47.0
	go.opentelemetry.io/otel/sdk/metric v1.47.0
)

require (
	github.com/bsm/redislock v0.9.4 // indirect
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/dsyncgo/dsync/backend/rueidis v0.0.0 // indirect
	github.com/go-logr/logr v1.4.4 // indirect
	github.com/go-logr/stdr v1.2.2 // indirect
	github.com/go-redsync/redsync/v4 v4.18.1 // indirect
	github.com/google/uuid v1.6.0 // indirect
	github.com/redis/rueidis v1.0.79 // indirect
	github.com/yuin/gopher-lua v1.1.1 // indirect
	go.opentelemetry.io/auto/sdk v1.2.1 // indirect
	go.opentelemetry.io/otel/log v1.47.0 // indirect
	go.opentelemetry.io/otel/metric v1.47.0 // indirect
	go.opentelemetry.io/otel/sdk v1.47.0 // indirect
	go.opentelemetry.io/otel/trace v1.47.0 // indirect
	go.uber.org/atomic v1.12.0 // indirect
	go.uber.org/goleak v1.3.0 // indirect
	golang.org/x/sys v0.48.0 // indirect
)

replace (
	github.com/dsyncgo/dsync => ../../
	github.com/dsyncgo/dsync/backend/goredis => ../../backend/goredis
	github.com/dsyncgo/dsync/backend/rueidis => ../../backend/rueidis
	github.com/dsyncgo/dsync/bench => ../../bench
	github.com/dsyncgo/dsync/otel => ../../otel
)
