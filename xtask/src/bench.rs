pub fn run_local(_rest: &[String]) -> crate::Result<()> { Err("todo".into()) }
pub fn collate(_rest: &[String]) -> crate::Result<()> { Err("todo".into()) }
