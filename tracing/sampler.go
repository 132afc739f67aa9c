package tracing

import (
	"fmt"
	"strconv"
	"strings"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// sampler is the configured sampler (OTEL_TRACES_SAMPLER's names;
// parentbased_always_on when unset). A run's spans are sampled or not as
// its root would be (RunContext), and a ratio sampler decides on the
// trace id, which every replica derives alike: a run is sampled whole.
func (c Config) sampler() (sdktrace.Sampler, error) {
	ratio := func() (float64, error) {
		if c.SamplerArg == "" {
			return 1, nil
		}
		r, err := strconv.ParseFloat(strings.TrimSpace(c.SamplerArg), 64)
		if err != nil || r < 0 || r > 1 {
			return 0, fmt.Errorf("sampler argument %q: want a ratio in [0, 1]", c.SamplerArg)
		}
		return r, nil
	}
	switch strings.ToLower(strings.TrimSpace(c.Sampler)) {
	case "", "parentbased_always_on":
		return sdktrace.ParentBased(sdktrace.AlwaysSample()), nil
	case "always_on":
		return sdktrace.AlwaysSample(), nil
	case "always_off":
		return sdktrace.NeverSample(), nil
	case "parentbased_always_off":
		return sdktrace.ParentBased(sdktrace.NeverSample()), nil
	case "traceidratio":
		r, err := ratio()
		return sdktrace.TraceIDRatioBased(r), err
	case "parentbased_traceidratio":
		r, err := ratio()
		return sdktrace.ParentBased(sdktrace.TraceIDRatioBased(r)), err
	}
	return nil, fmt.Errorf("sampler %q: want always_on, always_off, traceidratio or their parentbased_ forms", c.Sampler)
}
