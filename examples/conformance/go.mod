// The adapter author's conformance test as a module of its own, as in an
// adapter's repository: the library's go test ./... leaves it out, since
// it runs the suite backend/redigo already runs; .ci/usermod builds it and
// runs its TestBackend from a copy, as an author would.
module example.com/myadapter

go 1.25.0

require (
	github.com/dsyncgo/dsync v0.0.0
	github.com/gomodule/redigo v1.9.3
	go.uber.org/goleak v1.3.0
)

require go.yaml.in/yaml/v3 v3.0.6 // indirect

replace github.com/dsyncgo/dsync => ../..
