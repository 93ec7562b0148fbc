pub fn build(_rest: &[String]) -> crate::Result<()> { Err("todo".into()) }
