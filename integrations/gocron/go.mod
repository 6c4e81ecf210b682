module github.com/dsyncgo/dsync/integrations/gocron

go 1.26.0

require (
	github.com/dsyncgo/dsync v0.0.0
	github.com/go-co-op/gocron/v2 v2.21.2
	github.com/gomodule/redigo v1.9.3
)

require (
	github.com/google/uuid v1.6.0 // indirect
	github.com/jonboulle/clockwork v0.5.0 // indirect
	github.com/robfig/cron/v3 v3.0.1 // indirect
	go.uber.org/goleak v1.3.0 // indirect
	go.yaml.in/yaml/v3 v3.0.6 // indirect
)

// Until dsync is tagged, the integration builds against the checkout it
// lives in.
replace github.com/dsyncgo/dsync => ../..
