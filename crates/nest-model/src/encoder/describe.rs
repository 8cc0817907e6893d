//! What a loaded model is, as JSON: the one description `nest info --json` and the Python
//! package's `Model.info()` print (each adds what only it knows: the machine, the dtype chosen).

use serde_json::{json, Value};

use super::ElasticEncoder;

impl ElasticEncoder {
    /// Trainable parameters (the backbone's and any Dense head's).
    pub fn parameters(&self) -> i64 {
        self.vs
            .trainable_variables()
            .iter()
            .map(|t| t.numel() as i64)
            .sum()
    }

    /// The model's shape, pooling, elastic range and what it was trained for (`elastic`'s
    /// `trained_dims` and `trained_layers` are null when `nest.json` does not record them), and
    /// its prompts.
    pub fn describe(&self) -> Value {
        let c = &self.config;
        let recorded = |v: &Vec<usize>| (!v.is_empty()).then(|| v.clone());
        json!({
            "path": self.files.dir.display().to_string(),
            "architecture": c.model_type,
            "layers": self.num_layers(),
            "hidden_size": self.hidden_size(),
            "output_dim": self.output_dim(),
            "attention_heads": c.num_attention_heads,
            "intermediate_size": c.intermediate_size,
            "vocab_size": c.vocab_size,
            "parameters": self.parameters(),
            "pooling": self.pooling,
            "normalize": self.normalize,
            "max_seq_length": self.tokenizer.max_length(),
            "elastic": {
                "exit_layers": format!("1..={}", self.num_layers()),
                "dims": format!("1..={}", self.output_dim()),
                "trained_dims": recorded(&self.meta.matryoshka_dims),
                "trained_layers": recorded(&self.meta.trained_layers),
                "objective": self.meta.objective,
                "default_dim": self.meta.default_dim,
            },
            "prompts": self.prompts.named(),
            "default_prompt_name": self.prompts.default_name(),
            "include_prompt": self.include_prompt,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tch::Device;

    /// The tiny BERT's description: its shape from `config.json`, the parameters counted, and
    /// no trained range recorded (a model without `nest.json`).
    #[test]
    fn a_description_reads_the_models_shape() {
        let dir = tempfile::tempdir().unwrap();
        let spec = crate::tiny::TinySpec::new(crate::config::Architecture::Bert);
        crate::tiny::write_tiny_model(dir.path(), &spec).unwrap();
        let enc = ElasticEncoder::load(dir.path(), Device::Cpu, None).unwrap();
        let d = enc.describe();
        assert_eq!(d["layers"], enc.num_layers());
        assert_eq!(d["output_dim"], enc.output_dim());
        assert_eq!(d["architecture"], "bert");
        assert_eq!(
            d["elastic"]["exit_layers"],
            format!("1..={}", enc.num_layers())
        );
        assert!(d["elastic"]["trained_dims"].is_null());
        let counted: i64 = enc.vs.variables().values().map(|t| t.numel() as i64).sum();
        assert_eq!(d["parameters"], counted);
        assert!(counted > 0);
    }
}
