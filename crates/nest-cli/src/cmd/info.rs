use anyhow::Result;
use serde_json::json;

use crate::args::InfoArgs;

pub fn run(a: InfoArgs) -> Result<()> {
    let m = super::load_model_path(&a.model, None)?;
    let c = &m.config;
    let params: i64 =
        m.vs.trainable_variables()
            .iter()
            .map(|t| t.numel() as i64)
            .sum();
    let trained_dims = if m.meta.matryoshka_dims.is_empty() {
        None
    } else {
        Some(m.meta.matryoshka_dims.clone())
    };
    let trained_layers = if m.meta.trained_layers.is_empty() {
        None
    } else {
        Some(m.meta.trained_layers.clone())
    };
    let auto = nest_model::dtype::resolve(nest_model::DtypeChoice::Auto, m.device());
    let machine = nest_model::machine::Machine::this(m.device());
    let info = json!({
        "path": m.files.dir.display().to_string(),
        "architecture": c.model_type,
        "layers": m.num_layers(),
        "hidden_size": m.hidden_size(),
        "output_dim": m.output_dim(),
        "attention_heads": c.num_attention_heads,
        "intermediate_size": c.intermediate_size,
        "vocab_size": c.vocab_size,
        "parameters": params,
        "pooling": m.pooling,
        "normalize": m.normalize,
        "max_seq_length": m.tokenizer.max_length(),
        "elastic": {
            "exit_layers": format!("1..={}", m.num_layers()),
            "dims": format!("1..={}", m.output_dim()),
            "trained_dims": trained_dims,
            "trained_layers": trained_layers,
            "objective": m.meta.objective,
            "default_dim": m.meta.default_dim,
        },
        "dtype_auto": auto,
        "machine": machine,
        "prompts": m.prompts.named(),
        "default_prompt_name": m.prompts.default_name(),
        "include_prompt": m.include_prompt,
    });
    if a.json {
        println!("{}", serde_json::to_string_pretty(&info)?);
        return Ok(());
    }
    print_text(&m, params, &auto);
    println!("machine        {machine}");
    Ok(())
}

/// The human-readable form of `nest info`.
fn print_text(m: &nest_model::ElasticEncoder, params: i64, auto: &nest_model::dtype::Resolved) {
    let c = &m.config;
    println!("model          {}", m.files.dir.display());
    println!(
        "architecture   {} ({} layers x {} hidden, {} heads, ffn {})",
        c.model_type,
        m.num_layers(),
        m.hidden_size(),
        c.num_attention_heads,
        c.intermediate_size
    );
    println!("parameters     {:.1} M", params as f64 / 1e6);
    println!(
        "pooling        {:?}{}{}",
        m.pooling,
        match m.head.is_empty() {
            true => String::new(),
            false => format!(
                " + Dense {} ({})",
                m.head.describe(),
                m.head
                    .modules()
                    .iter()
                    .map(|d| d.folder.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        },
        if m.normalize { " + L2 normalise" } else { "" }
    );
    println!("max tokens     {}", m.tokenizer.max_length());
    println!(
        "exit layers    1..={} (any; computed layers = chosen layer)",
        m.num_layers()
    );
    println!(
        "prefix dims    1..={} (any; truncate then re-normalise)",
        m.output_dim()
    );
    match (&m.meta.matryoshka_dims, &m.meta.trained_layers) {
        (d, l) if d.is_empty() && l.is_empty() => println!(
            "trained for    not recorded (no nest.json): only the full point (layer {}, dim {}) is known to be trained",
            m.num_layers(),
            m.output_dim()
        ),
        (d, l) => {
            println!("trained dims   {d:?}");
            println!("trained layers {l:?}");
        }
    }
    if let Some(o) = &m.meta.objective {
        println!("objective      {o}");
    }
    if let Some(d) = m.meta.default_dim {
        println!("default dim    {d} (nest truncates to it unless --dim says otherwise)");
    }
    if !m.prompts.named().is_empty() {
        println!(
            "prompts        {} (default: {}{})",
            m.prompts.names(),
            m.prompts.default_name().unwrap_or("none"),
            if m.include_prompt {
                ""
            } else {
                "; pooling leaves the prompt out"
            }
        );
    }
    println!("dtype auto     {} ({})", auto.dtype, auto.reason);
}
