//! The Hadoop Streaming command line of a YARN job: map-only, one task per line of the task
//! list (`NLineInputFormat`, one line per map, the offset key dropped), the binary and the
//! task spec shipped with `-files`, and no output of the mappers' own (`-lazyOutput`): a
//! slice writes its files into the task attempt's folder itself.
//!
//! Generic options (`-D`, `-files`) come before the streaming ones, as `mapred streaming`
//! requires.

/// The link names of the shipped files in each task's working folder.
pub const BINARY_LINK: &str = "weibo-etl";
pub const SPEC_LINK: &str = "job.json";

/// One streaming job to submit.
#[derive(Clone, Debug)]
pub struct StreamingJob {
    /// The job's name in YARN.
    pub name: String,
    /// The binary on HDFS.
    pub binary: String,
    /// The task spec on HDFS.
    pub spec: String,
    /// The task list on HDFS.
    pub tasks_file: String,
    /// The streaming job's output folder, where the committer promotes task outputs.
    pub output: String,
    /// The YARN queue, if not the default.
    pub queue: Option<String>,
    /// Memory of each map container, in MB: the binary's, since the work runs there.
    pub memory_mb: u32,
    /// Attempts per task before the job fails.
    pub max_attempts: u32,
}

impl StreamingJob {
    /// The arguments of `mapred streaming`.
    pub fn args(&self) -> Vec<String> {
        let mut d = vec![
            format!("mapreduce.job.name={}", self.name),
            "mapreduce.input.lineinputformat.linespermap=1".into(),
            "stream.map.input.ignoreKey=true".into(),
            format!("mapreduce.map.memory.mb={}", self.memory_mb),
            format!("mapreduce.map.maxattempts={}", self.max_attempts),
            // A second attempt of a running slice only doubles its work.
            "mapreduce.map.speculative=false".into(),
            // v1: task outputs become visible at job commit only (v2 is not atomic).
            "mapreduce.fileoutputcommitter.algorithm.version=1".into(),
        ];
        if let Some(queue) = &self.queue {
            d.push(format!("mapreduce.job.queuename={queue}"));
        }
        let mut args = Vec::new();
        for define in d {
            args.push("-D".to_string());
            args.push(define);
        }
        args.push("-files".into());
        args.push(format!(
            "{}#{BINARY_LINK},{}#{SPEC_LINK}",
            self.binary, self.spec
        ));
        for (flag, value) in [
            ("-input", self.tasks_file.as_str()),
            ("-output", self.output.as_str()),
            ("-mapper", &format!("{BINARY_LINK} yarn task {SPEC_LINK}")),
            (
                "-inputformat",
                "org.apache.hadoop.mapred.lib.NLineInputFormat",
            ),
            ("-numReduceTasks", "0"),
        ] {
            args.push(flag.to_string());
            args.push(value.to_string());
        }
        args.push("-lazyOutput".into());
        args
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generic_options_come_first_and_the_job_is_map_only() {
        let job = StreamingJob {
            name: "weibo-etl friends".into(),
            binary: "hdfs:///apps/weibo-etl/0.1.0-ab/weibo-etl".into(),
            spec: "hdfs:///g/_yarn/x/job.json".into(),
            tasks_file: "hdfs:///g/_yarn/x/tasks.txt".into(),
            output: "hdfs:///g/_yarn/x/out".into(),
            queue: Some("etl".into()),
            memory_mb: 2048,
            max_attempts: 4,
        };
        let args = job.args();
        let at = |flag: &str| args.iter().position(|a| a == flag).unwrap();
        let last_define = args.iter().rposition(|a| a == "-D").unwrap();
        assert!(last_define < at("-files") && at("-files") < at("-input"));
        assert_eq!(
            args[at("-files") + 1],
            "hdfs:///apps/weibo-etl/0.1.0-ab/weibo-etl#weibo-etl,hdfs:///g/_yarn/x/job.json#job.json"
        );
        assert_eq!(args[at("-mapper") + 1], "weibo-etl yarn task job.json");
        assert_eq!(args[at("-numReduceTasks") + 1], "0");
        for define in [
            "mapreduce.job.queuename=etl",
            "mapreduce.map.memory.mb=2048",
            "stream.map.input.ignoreKey=true",
            "mapreduce.input.lineinputformat.linespermap=1",
        ] {
            assert!(args.iter().any(|a| a == define), "{define}");
        }
        assert_eq!(args.last().unwrap(), "-lazyOutput");
    }
}
