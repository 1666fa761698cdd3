package k8s

import (
	"fmt"

	"github.com/go-logr/zapr"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"k8s.io/klog/v2"
)

// NewLogger returns a zap logger writing JSON (or console text when
// development is set) to stderr at the given level ("debug", "info", "warn",
// "error"), and routes client-go's klog output into it.
func NewLogger(level string, development bool) (*zap.Logger, error) {
	var lvl zapcore.Level
	if err := lvl.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("log level %q: %w", level, err)
	}
	cfg := zap.NewProductionConfig()
	if development {
		cfg = zap.NewDevelopmentConfig()
	}
	cfg.Level = zap.NewAtomicLevelAt(lvl)
	cfg.Sampling = nil
	log, err := cfg.Build()
	if err != nil {
		return nil, err
	}
	RouteKlog(log)
	return log, nil
}

// RouteKlog sends klog (client-go's logging: leader election, reflectors,
// event broadcasting) to log.
func RouteKlog(log *zap.Logger) {
	klog.SetLogger(zapr.NewLogger(log.Named("client-go")))
}
