use anyhow::Result;
use serde_json::json;

use crate::args::InfoArgs;

pub fn run(a: InfoArgs) -> Result<()> {
    let target = a.path.as_deref().unwrap_or(&a.model);
    if std::path::Path::new(target).join("adaptor.json").is_file() {
        return adaptor(std::path::Path::new(target), a.json);
    }
    let m = super::load_model_path(target, None)?;
    let params = m.parameters();
    let auto = nest_model::dtype::resolve(nest_model::DtypeChoice::Auto, m.device());
    let machine = nest_model::machine::Machine::this(m.device());
    let mut info = m.describe();
    info["dtype_auto"] = json!(auto);
    info["machine"] = json!(machine);
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
            "trained for    not recorded ({}): only the full point (layer {}, dim {}) is known to \
             be trained",
            match m.files.dir.join("nest.json").is_file() {
                true => "nest.json lists no trained layers or dims",
                false => "no nest.json",
            },
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

/// `nest info ADAPTOR`: what an adaptor is, what it was trained on, and its recorded scores.
fn adaptor(dir: &std::path::Path, as_json: bool) -> Result<()> {
    let a = nest_model::Adaptor::load(dir)?;
    let info = &a.meta.info;
    let mut source = info["source"].clone();
    if let Some(s) = source.as_object_mut() {
        // the probe's vector is for the check where the adaptor is loaded, not for reading
        s.remove("probe");
    }
    let summary = json!({
        "adaptor": dir.display().to_string(), "method": a.meta.method,
        "input_dim": a.meta.input_dim, "dims": a.dims(), "source": source,
        "probe_recorded": a.probe().is_some(),
        "val_ndcg_at_10": info["val_ndcg_at_10"], "test_ndcg_at_10": info["test_ndcg_at_10"],
        "truncated_val_ndcg_at_10": info["truncated_val_ndcg_at_10"],
        "truncated_test_ndcg_at_10": info["truncated_test_ndcg_at_10"],
    });
    if as_json {
        println!("{}", serde_json::to_string_pretty(&summary)?);
        return Ok(());
    }
    let s = |k: &str| source[k].as_str().unwrap_or("-").to_string();
    println!("adaptor        {}", dir.display());
    let heads = match a.heads.len() {
        1 => "1 head".to_string(),
        n => format!("{n} heads"),
    };
    println!("method         {} ({heads})", a.meta.method);
    println!(
        "dims           {:?} from {} input dims",
        a.dims(),
        a.meta.input_dim
    );
    match source.get("model") {
        Some(_) => println!(
            "trained on     {} over {} ({})",
            s("model"),
            s("beir"),
            s("split")
        ),
        None => println!("trained on     embedding files {}", s("embeddings")),
    }
    println!(
        "model check    {}",
        match a.probe() {
            Some(_) => "a probe vector is recorded: loading it beside another model warns",
            None => "none recorded (trained on embedding files, or before the record)",
        }
    );
    super::compress::print_scores(&a);
    Ok(())
}
