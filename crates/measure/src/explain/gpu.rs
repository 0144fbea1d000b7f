//! The GPU, the card and the driver. When the two were timed differently,
//! B's sibling at A's conditions less A measures B's subject on B's GPU
//! against A's on A's (`Ctx::subject_check`): the GPU holds that change as
//! the first cause of the subject. Otherwise no record times the same kernels
//! on both, so it takes what the measured causes leave (the kernels'
//! difference too, when they were compiled for it: see `kernels.rs`).

use super::check::{known_differ, mb, Check, Ctx, Est};
use super::Cause;

pub(super) const TITLE: &str = "different GPU or driver";

pub(super) fn check(ctx: &Ctx) -> Check {
    let (ea, eb) = (&ctx.a().environment, &ctx.b().environment);
    let mut d = Vec::new();
    if known_differ(&ea.gpu_name, &eb.gpu_name) {
        d.push(format!("GPU {} vs {}", ea.gpu_name, eb.gpu_name));
    } else if known_differ(&ea.gpu_uuid, &eb.gpu_uuid) {
        let card = |uuid: &str, pci: &str| {
            if pci.is_empty() {
                uuid.to_string()
            } else {
                format!("{uuid} at PCI {pci}")
            }
        };
        d.push(format!(
            "same model, another card ({} vs {})",
            card(&ea.gpu_uuid, &ea.pci_bus),
            card(&eb.gpu_uuid, &eb.pci_bus)
        ));
    }
    if known_differ(&ea.driver, &eb.driver) || known_differ(&ea.cuda, &eb.cuda) {
        d.push(format!(
            "driver {} / CUDA {} vs {} / {}",
            ea.driver, ea.cuda, eb.driver, eb.cuda
        ));
    }
    if (ea.sm_count > 0 && eb.sm_count > 0 && ea.sm_count != eb.sm_count)
        || (ea.l2_bytes > 0 && eb.l2_bytes > 0 && ea.l2_bytes != eb.l2_bytes)
    {
        d.push(format!(
            "{} SMs, L2 {} vs {} SMs, L2 {}",
            ea.sm_count,
            mb(ea.l2_bytes),
            eb.sm_count,
            mb(eb.l2_bytes)
        ));
    }
    if d.is_empty() {
        let driver = if ea.driver.is_empty() {
            format!("CUDA {}", ea.cuda)
        } else {
            format!("driver {}", ea.driver)
        };
        Check::ruled_out(format!("same GPU ({}) and {driver}", ea.gpu_name))
    } else {
        let detail = d.join("; ");
        ctx.subject_check(Cause::Gpu, &detail).unwrap_or_else(|| {
            Check::differs(
                detail,
                Est::open("not measured separately: no record times the same kernels on both"),
            )
        })
    }
}
