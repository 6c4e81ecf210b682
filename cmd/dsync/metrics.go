package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

// printMetrics prints what reader collected, a line per metric series.
func printMetrics(ctx context.Context, out io.Writer, reader *sdkmetric.ManualReader) error {
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.WithoutCancel(ctx), &rm); err != nil {
		return fmt.Errorf("metrics: %w", err)
	}
	fmt.Fprintln(out, "\nmetrics (OpenTelemetry, as package github.com/dsyncgo/dsync/otel records them):")
	var lines []string
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			switch d := m.Data.(type) {
			case metricdata.Histogram[float64]:
				for _, dp := range d.DataPoints {
					max, _ := dp.Max.Value()
					lines = append(lines, fmt.Sprintf("  %-26s %-58s count %-5d mean %-10v max %v", m.Name, attrs(dp.Attributes.ToSlice()),
						dp.Count, seconds(dp.Sum/float64(max1(dp.Count))), seconds(max)))
				}
			case metricdata.Sum[int64]:
				for _, dp := range d.DataPoints {
					lines = append(lines, fmt.Sprintf("  %-26s %-58s %d", m.Name, attrs(dp.Attributes.ToSlice()), dp.Value))
				}
			}
		}
	}
	slices.Sort(lines)
	for _, l := range lines {
		fmt.Fprintln(out, l)
	}
	return nil
}

func max1(n uint64) uint64 { return max(n, 1) }

func seconds(s float64) time.Duration {
	return time.Duration(s * float64(time.Second)).Round(time.Microsecond)
}

// attrs formats attributes as {k=v ...}.
func attrs(kvs []attribute.KeyValue) string {
	parts := make([]string, len(kvs))
	for i, kv := range kvs {
		parts[i] = string(kv.Key) + "=" + kv.Value.String()
	}
	return "{" + strings.Join(parts, " ") + "}"
}
