//! Prometheus metrics (`GET /metrics`, text exposition format), through the `prometheus` crate.

use std::sync::LazyLock;

use prometheus::{
    Encoder, Histogram, HistogramOpts, IntCounter, IntCounterVec, IntGauge, IntGaugeVec, Opts,
    Registry, TextEncoder,
};

/// Every metric the server exports.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    pub requests: IntCounterVec,
    pub latency: Histogram,
    pub batch_inputs: Histogram,
    pub batch_tokens: Histogram,
    pub queue_depth: IntGauge,
    pub inputs: IntCounter,
    pub tokens: IntCounter,
    /// 1 for the arithmetic the workers run in (`dtype` label).
    pub model_dtype: IntGaugeVec,
}

pub static METRICS: LazyLock<Metrics> = LazyLock::new(Metrics::new);

impl Metrics {
    fn new() -> Self {
        let registry = Registry::new();
        let requests = IntCounterVec::new(
            Opts::new("nest_requests_total", "Embedding requests by HTTP status"),
            &["status"],
        )
        .expect("static metric definition");
        let latency = Histogram::with_opts(
            HistogramOpts::new(
                "nest_request_duration_seconds",
                "Time from a request's arrival to its response",
            )
            .buckets(prometheus::exponential_buckets(0.001, 2.0, 16).expect("static buckets")),
        )
        .expect("static metric definition");
        let batch_inputs = Histogram::with_opts(
            HistogramOpts::new("nest_batch_inputs", "Inputs per forward batch")
                .buckets(prometheus::exponential_buckets(1.0, 2.0, 10).expect("static buckets")),
        )
        .expect("static metric definition");
        let batch_tokens = Histogram::with_opts(
            HistogramOpts::new("nest_batch_tokens", "Padded tokens per forward batch")
                .buckets(prometheus::exponential_buckets(16.0, 2.0, 12).expect("static buckets")),
        )
        .expect("static metric definition");
        let queue_depth = IntGauge::new("nest_queue_depth", "Inputs waiting for a forward pass")
            .expect("static metric definition");
        let inputs = IntCounter::new("nest_inputs_total", "Inputs embedded")
            .expect("static metric definition");
        let tokens = IntCounter::new("nest_tokens_total", "Tokens embedded")
            .expect("static metric definition");
        let model_dtype = IntGaugeVec::new(
            Opts::new(
                "nest_model_dtype_info",
                "The arithmetic the model runs in (1 for the dtype label in use)",
            ),
            &["dtype"],
        )
        .expect("static metric definition");
        for c in [
            Box::new(requests.clone()) as Box<dyn prometheus::core::Collector>,
            Box::new(latency.clone()),
            Box::new(batch_inputs.clone()),
            Box::new(batch_tokens.clone()),
            Box::new(queue_depth.clone()),
            Box::new(inputs.clone()),
            Box::new(tokens.clone()),
            Box::new(model_dtype.clone()),
        ] {
            registry.register(c).expect("metric names are unique");
        }
        Metrics {
            registry,
            requests,
            latency,
            batch_inputs,
            batch_tokens,
            queue_depth,
            inputs,
            tokens,
            model_dtype,
        }
    }

    /// Counts a finished request by status.
    pub fn errors(&self, status: u16) {
        self.requests
            .with_label_values(&[&status.to_string()])
            .inc();
    }

    /// The text exposition of every metric.
    pub fn render(&self) -> String {
        let mut buf = Vec::new();
        let _ = TextEncoder::new().encode(&self.registry.gather(), &mut buf);
        String::from_utf8(buf).unwrap_or_default()
    }
}
