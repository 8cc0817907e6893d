//! The objective registry: every `[[objective]]` kind a recipe may name. Each method's config
//! lives in the method's own file and implements [`Component`] there (its value checks and how
//! it is built for a model); this file only maps a recipe entry to its config.

use serde::{Deserialize, Serialize};

use super::component::Component;
use super::distill::DistillConfig;
use super::ese::EseConfig;
use super::hsic::HsicConfig;
use super::mic::MicConfig;
use super::mipic::MipicConfig;
use super::mrl::MrlConfig;
use super::two_d::TwoDConfig;

/// One component of the training objective: a `[[objective]]` table with a `kind` and that
/// kind's own keys (unknown keys are refused with the valid ones listed). Components are summed,
/// each scaled by its `weight`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind")]
pub(crate) enum ObjectiveSpec {
    /// Matryoshka at the last layer ([`super::mrl`]).
    #[serde(rename = "mrl")]
    Mrl(MrlConfig),
    /// 2DMSE ([`super::TwoDMse`]).
    #[serde(rename = "2dmse")]
    TwoD(TwoDConfig),
    /// ESE ([`super::Ese`]).
    #[serde(rename = "ese")]
    Ese(EseConfig),
    /// MIPIC's SIA and PIC ([`super::mipic::Mipic`]).
    #[serde(rename = "mipic")]
    Mipic(MipicConfig),
    /// MIC's SCR and SIR ([`super::mic::Mic`]).
    #[serde(rename = "mic")]
    Mic(MicConfig),
    /// IBKD's teacher matching ([`super::distill`]; `nest distill` only).
    #[serde(rename = "distill")]
    Distill(DistillConfig),
    /// IBKD's `beta * HSIC(X, S)` ([`super::hsic`]).
    #[serde(rename = "hsic")]
    Hsic(HsicConfig),
}

impl ObjectiveSpec {
    pub(crate) fn kind(&self) -> &'static str {
        match self {
            ObjectiveSpec::Mrl(_) => "mrl",
            ObjectiveSpec::TwoD(_) => "2dmse",
            ObjectiveSpec::Ese(_) => "ese",
            ObjectiveSpec::Mipic(_) => "mipic",
            ObjectiveSpec::Mic(_) => "mic",
            ObjectiveSpec::Distill(_) => "distill",
            ObjectiveSpec::Hsic(_) => "hsic",
        }
    }

    /// The method's config behind this entry.
    pub(crate) fn component(&self) -> &dyn Component {
        match self {
            ObjectiveSpec::Mrl(c) => c,
            ObjectiveSpec::TwoD(c) => c,
            ObjectiveSpec::Ese(c) => c,
            ObjectiveSpec::Mipic(c) => c,
            ObjectiveSpec::Mic(c) => c,
            ObjectiveSpec::Distill(c) => c,
            ObjectiveSpec::Hsic(c) => c,
        }
    }

    /// Value checks that need no model: the method's own and a positive, finite weight.
    pub(crate) fn validate(&self) -> Result<(), String> {
        let c = self.component();
        c.validate()?;
        let w = c.weight();
        if !(w > 0.0 && w.is_finite()) {
            return Err(format!("weight must be > 0, got {w}"));
        }
        Ok(())
    }
}
