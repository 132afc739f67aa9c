package tracing

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// Exporters (OTEL_TRACES_EXPORTER) and protocols
// (OTEL_EXPORTER_OTLP_PROTOCOL) this package speaks.
const (
	ExporterOTLP = "otlp"
	ExporterNone = "none"

	ProtocolGRPC = "grpc"
	ProtocolHTTP = "http/protobuf"
)

// Defaults of the export queue (the OTEL_BSP_* variables override them).
const (
	// DefaultQueueSize bounds the spans waiting for export; a span ended
	// while it is full is dropped and counted.
	DefaultQueueSize = 2048
	// DefaultBatchSize bounds the spans of one export call.
	DefaultBatchSize = 512
	// DefaultScheduleDelay is the longest a queued span waits for its
	// batch to fill.
	DefaultScheduleDelay = 5 * time.Second
	// DefaultExportTimeout bounds one export call; its spans are dropped
	// when it passes.
	DefaultExportTimeout = 30 * time.Second
)

// DefaultServiceName is service.name when neither OTEL_SERVICE_NAME nor
// OTEL_RESOURCE_ATTRIBUTES names one.
const DefaultServiceName = "oecp"

// Config says whether and where spans go. The zero Config is off.
type Config struct {
	// Exporter is "otlp" or "none"/"" (off). Endpoint set with Exporter
	// "" means otlp.
	Exporter string
	// Endpoint is the collector's base URL (http://host:4317 for gRPC,
	// http://host:4318 for HTTP, whose /v1/traces is added); "" leaves the
	// exporter to the OTEL_EXPORTER_OTLP_[TRACES_]ENDPOINT variables and
	// their default.
	Endpoint string
	// Protocol is "grpc" (the default) or "http/protobuf".
	Protocol string
	// ServiceName overrides service.name; ResourceAttributes adds
	// key=value,… pairs (OTEL_RESOURCE_ATTRIBUTES' syntax).
	ServiceName        string
	ResourceAttributes string
	// Sampler and SamplerArg are OTEL_TRACES_SAMPLER's names
	// (parentbased_always_on by default) and argument.
	Sampler    string
	SamplerArg string
	// The export queue: 0 takes the default.
	QueueSize     int
	BatchSize     int
	ScheduleDelay time.Duration
	ExportTimeout time.Duration
}

// On reports whether c turns tracing on.
func (c Config) On() bool {
	switch strings.ToLower(c.Exporter) {
	case ExporterOTLP:
		return true
	case "":
		return c.Endpoint != ""
	}
	return false
}

// FromEnv reads the standard variables through getenv (os.Getenv when
// nil). Tracing is on when OTEL_TRACES_EXPORTER is otlp or an OTLP
// endpoint variable is set, and off when OTEL_SDK_DISABLED is true or
// OTEL_TRACES_EXPORTER is none: unlike the SDK's own default, an
// unconfigured server exports nothing.
func FromEnv(getenv func(string) string) (Config, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	var c Config
	if strings.EqualFold(strings.TrimSpace(getenv("OTEL_SDK_DISABLED")), "true") {
		return c, nil
	}
	c.Exporter = strings.ToLower(strings.TrimSpace(getenv("OTEL_TRACES_EXPORTER")))
	switch c.Exporter {
	case "", ExporterOTLP, ExporterNone:
	default:
		return Config{}, fmt.Errorf("OTEL_TRACES_EXPORTER %q: only otlp and none are supported", c.Exporter)
	}
	if c.Exporter == "" && (getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != "") {
		c.Exporter = ExporterOTLP
	}
	c.Protocol = firstOf(getenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"), getenv("OTEL_EXPORTER_OTLP_PROTOCOL"))
	c.Sampler, c.SamplerArg = getenv("OTEL_TRACES_SAMPLER"), getenv("OTEL_TRACES_SAMPLER_ARG")
	var err error
	for _, v := range []struct {
		name string
		n    *int
	}{{"OTEL_BSP_MAX_QUEUE_SIZE", &c.QueueSize}, {"OTEL_BSP_MAX_EXPORT_BATCH_SIZE", &c.BatchSize}} {
		if s := getenv(v.name); s != "" {
			if *v.n, err = strconv.Atoi(s); err != nil || *v.n <= 0 {
				return Config{}, fmt.Errorf("%s %q: want a positive integer", v.name, s)
			}
		}
	}
	for _, v := range []struct {
		name string
		d    *time.Duration
	}{{"OTEL_BSP_SCHEDULE_DELAY", &c.ScheduleDelay}, {"OTEL_BSP_EXPORT_TIMEOUT", &c.ExportTimeout}} {
		if s := getenv(v.name); s != "" {
			ms, err := strconv.Atoi(s)
			if err != nil || ms <= 0 {
				return Config{}, fmt.Errorf("%s %q: want a positive number of milliseconds", v.name, s)
			}
			*v.d = time.Duration(ms) * time.Millisecond
		}
	}
	return c, c.check()
}

// Merge is c with every field o sets taking o's value (flags over the
// environment).
func (c Config) Merge(o Config) Config {
	pick := func(a, b string) string { return firstOf(b, a) }
	c.Exporter, c.Endpoint, c.Protocol = pick(c.Exporter, o.Exporter), pick(c.Endpoint, o.Endpoint), pick(c.Protocol, o.Protocol)
	c.ServiceName, c.ResourceAttributes = pick(c.ServiceName, o.ServiceName), pick(c.ResourceAttributes, o.ResourceAttributes)
	c.Sampler, c.SamplerArg = pick(c.Sampler, o.Sampler), pick(c.SamplerArg, o.SamplerArg)
	if o.QueueSize > 0 {
		c.QueueSize = o.QueueSize
	}
	if o.BatchSize > 0 {
		c.BatchSize = o.BatchSize
	}
	if o.ScheduleDelay > 0 {
		c.ScheduleDelay = o.ScheduleDelay
	}
	if o.ExportTimeout > 0 {
		c.ExportTimeout = o.ExportTimeout
	}
	return c
}

// check refuses a protocol or sampler this package does not know.
func (c Config) check() error {
	switch c.Protocol {
	case "", ProtocolGRPC, ProtocolHTTP:
	default:
		return fmt.Errorf("OTLP protocol %q: want grpc or http/protobuf", c.Protocol)
	}
	_, err := c.sampler()
	return err
}

func (c Config) withDefaults() Config {
	if c.Protocol == "" {
		c.Protocol = ProtocolGRPC
	}
	if c.QueueSize <= 0 {
		c.QueueSize = DefaultQueueSize
	}
	if c.BatchSize <= 0 {
		c.BatchSize = DefaultBatchSize
	}
	c.BatchSize = min(c.BatchSize, c.QueueSize)
	if c.ScheduleDelay <= 0 {
		c.ScheduleDelay = DefaultScheduleDelay
	}
	if c.ExportTimeout <= 0 {
		c.ExportTimeout = DefaultExportTimeout
	}
	return c
}

func firstOf(vs ...string) string {
	for _, v := range vs {
		if v = strings.TrimSpace(v); v != "" {
			return v
		}
	}
	return ""
}
