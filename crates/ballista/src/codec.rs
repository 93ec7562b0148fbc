//! [`BallistaGpuCodec`]: Ballista's physical codec with [`GpuJoinExec`] added.

use std::io::Write as _;
use std::sync::Arc;

use ballista_core::serde::BallistaPhysicalExtensionCodec;
use datafusion::common::{internal_err, Result};
use datafusion::execution::TaskContext;
use datafusion::logical_expr::{AggregateUDF, ScalarUDF, WindowUDF};
use datafusion::physical_plan::ExecutionPlan;
use datafusion_proto::physical_plan::{PhysicalExtensionCodec, PhysicalProtoConverterExtension};
use gpujoin_datafusion::{CpuJoinKeptExec, GpuJoinCodec, GpuJoinConfig, GpuJoinExec, KeyFilterExec};

/// The first bytes of an encoded [`GpuJoinExec`], [`CpuJoinKeptExec`] (GpuJoinRule's note
/// above a join it kept on the CPU) or [`KeyFilterExec`] (a semi-join reduction). A protobuf message never starts with `G`
/// (0x47: field 8 of wire type 7, which does not exist), so Ballista's own nodes cannot be
/// mistaken for one.
const MAGIC: &[u8] = b"GPUJ";

/// The environment variable naming a file to which an executor appends one line per
/// [`GpuJoinExec`] it decodes (that is, receives in a task and is about to run):
/// `pid <TAB> device <TAB> mode <TAB> join type`. Tests read it to check that the joins of the
/// executors' stages ran on the GPU.
pub const JOIN_LOG_ENV: &str = "GPUJOIN_BALLISTA_JOIN_LOG";

/// A `PhysicalExtensionCodec` for Ballista plans holding [`GpuJoinExec`]s: Ballista's own
/// [`BallistaPhysicalExtensionCodec`] (shuffle readers and writers, ...) and
/// [`GpuJoinCodec`] for the GPU joins. Scheduler, executors and client must all use it.
///
/// On an executor, [`BallistaGpuCodec::for_executor`] sets the device of every decoded join to
/// the executor's GPU: the scheduler plans with its own view of the devices, the executor
/// runs on the one it was started with.
///
/// ```no_run
/// use std::sync::Arc;
/// use ballista_core::extension::SessionConfigExt;
/// use datafusion::prelude::SessionConfig;
/// let config = SessionConfig::new_with_ballista()
///     .with_ballista_physical_extension_codec(Arc::new(gpujoin_ballista::BallistaGpuCodec::default()));
/// ```
#[derive(Debug, Default)]
pub struct BallistaGpuCodec {
    ballista: BallistaPhysicalExtensionCodec,
    device: Option<usize>,
}

impl BallistaGpuCodec {
    /// The codec of an executor whose joins run on CUDA device `device` (an index among the
    /// devices `CUDA_VISIBLE_DEVICES` exposes).
    pub fn for_executor(device: usize) -> Self {
        BallistaGpuCodec { ballista: BallistaPhysicalExtensionCodec::default(), device: Some(device) }
    }

    /// The device decoded joins are moved to (`None`: as encoded).
    pub fn device(&self) -> Option<usize> {
        self.device
    }
}

fn log_join(exec: &GpuJoinExec) {
    let Some(path) = std::env::var_os(JOIN_LOG_ENV) else { return };
    let line = format!("{}\t{}\t{:?}\t{:?}\n", std::process::id(), exec.config().device, exec.mode(), exec.join_type());
    // One O_APPEND write per line: several executors may share the file.
    if let Ok(mut f) = std::fs::OpenOptions::new().create(true).append(true).open(&path) {
        let _ = f.write_all(line.as_bytes());
    }
}

impl PhysicalExtensionCodec for BallistaGpuCodec {
    fn try_decode(&self, buf: &[u8], inputs: &[Arc<dyn ExecutionPlan>], ctx: &TaskContext, converter: &dyn PhysicalProtoConverterExtension) -> Result<Arc<dyn ExecutionPlan>> {
        let Some(rest) = buf.strip_prefix(MAGIC) else {
            return self.ballista.try_decode(buf, inputs, ctx, converter);
        };
        let plan = GpuJoinCodec.try_decode(rest, inputs, ctx, converter)?;
        let Some(exec) = plan.downcast_ref::<GpuJoinExec>() else { return Ok(plan) };
        let plan = match self.device {
            Some(device) if device != exec.config().device => {
                let config = GpuJoinConfig { device, ..exec.config().clone() };
                // From the decoded inputs (not exec's, which try_new may have wrapped).
                let [left, right] = inputs else { return internal_err!("GpuJoinExec with {} inputs", inputs.len()) };
                let mut moved = GpuJoinExec::try_new(Arc::clone(left), Arc::clone(right), exec.on().to_vec(), exec.filter().cloned(), exec.join_type(), exec.null_equality(), exec.projection().map(<[usize]>::to_vec), exec.mode(), config)?;
                if let Some(r) = exec.replaces() {
                    moved = moved.replacing(r);
                }
                Arc::new(moved) as Arc<dyn ExecutionPlan>
            }
            _ => plan,
        };
        if let Some(exec) = plan.downcast_ref::<GpuJoinExec>() {
            log_join(exec);
        }
        Ok(plan)
    }

    fn try_encode(&self, node: Arc<dyn ExecutionPlan>, buf: &mut Vec<u8>, converter: &dyn PhysicalProtoConverterExtension) -> Result<()> {
        if node.downcast_ref::<GpuJoinExec>().is_some() || node.downcast_ref::<CpuJoinKeptExec>().is_some() || node.downcast_ref::<KeyFilterExec>().is_some() {
            buf.extend_from_slice(MAGIC);
            return GpuJoinCodec.try_encode(node, buf, converter);
        }
        self.ballista.try_encode(node, buf, converter)
    }

    fn try_decode_udf(&self, name: &str, buf: &[u8]) -> Result<Arc<ScalarUDF>> {
        self.ballista.try_decode_udf(name, buf)
    }

    fn try_encode_udf(&self, node: &ScalarUDF, buf: &mut Vec<u8>) -> Result<()> {
        self.ballista.try_encode_udf(node, buf)
    }

    fn try_decode_udaf(&self, name: &str, buf: &[u8]) -> Result<Arc<AggregateUDF>> {
        self.ballista.try_decode_udaf(name, buf)
    }

    fn try_encode_udaf(&self, node: &AggregateUDF, buf: &mut Vec<u8>) -> Result<()> {
        self.ballista.try_encode_udaf(node, buf)
    }

    fn try_decode_udwf(&self, name: &str, buf: &[u8]) -> Result<Arc<WindowUDF>> {
        self.ballista.try_decode_udwf(name, buf)
    }

    fn try_encode_udwf(&self, node: &WindowUDF, buf: &mut Vec<u8>) -> Result<()> {
        self.ballista.try_encode_udwf(node, buf)
    }
}
