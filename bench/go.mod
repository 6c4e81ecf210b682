module github.com/dsyncgo/dsync/bench

go 1.26.0

require (
	github.com/bsm/redislock v0.9.4
	github.com/dsyncgo/dsync v0.0.0
	github.com/dsyncgo/dsync/backend/goredis v0.0.0
	github.com/dsyncgo/dsync/backend/rueidis v0.0.0
	github.com/go-redsync/redsync/v4 v4.18.1
	github.com/gomodule/redigo v1.9.3
	github.com/redis/go-redis/v9 v9.23.0
	github.com/redis/rueidis v1.0.79
	go.uber.org/goleak v1.3.0
)

require (
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	go.uber.org/atomic v1.12.0 // indirect
	golang.org/x/sys v0.48.0 // indirect
)

replace (
	github.com/dsyncgo/dsync => ../
	github.com/dsyncgo/dsync/backend/goredis => ../backend/goredis
	github.com/dsyncgo/dsync/backend/rueidis => ../backend/rueidis
)
