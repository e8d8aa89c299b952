package ccmproc

import (
	"fmt"
	"io"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// SumSeries reads a Prometheus text exposition and sums the samples of
// the counter or gauge metric by key, which names a series by its labels
// (series whose key is the same are added up).
func SumSeries(r io.Reader, metric string, key func(labels map[string]string) string) (map[string]float64, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	families, err := p.TextToMetricFamilies(r)
	if err != nil {
		return nil, fmt.Errorf("reading metrics: %w", err)
	}
	out := map[string]float64{}
	f, ok := families[metric]
	if !ok {
		return out, nil
	}
	for _, m := range f.GetMetric() {
		labels := make(map[string]string, len(m.GetLabel()))
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		switch {
		case m.GetCounter() != nil:
			out[key(labels)] += m.GetCounter().GetValue()
		case m.GetGauge() != nil:
			out[key(labels)] += m.GetGauge().GetValue()
		}
	}
	return out, nil
}
