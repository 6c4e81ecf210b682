module github.com/dsyncgo/dsync/tests

go 1.25.0

require (
	github.com/alicebob/miniredis/v2 v2.40.0
	github.com/dsyncgo/dsync v0.0.0
	github.com/gomodule/redigo v1.9.3
	go.uber.org/goleak v1.3.0
)

require (
	github.com/yuin/gopher-lua v1.1.1 // indirect
	go.yaml.in/yaml/v3 v3.0.5 // indirect
)

replace github.com/dsyncgo/dsync => ../
