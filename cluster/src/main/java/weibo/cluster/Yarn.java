package weibo.cluster;

import java.io.File;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.mapred.JobConf;
import org.apache.hadoop.mapreduce.v2.MiniMRYarnCluster;
import org.apache.hadoop.streaming.StreamJob;
import org.apache.hadoop.util.ToolRunner;

/**
 * The local cluster's YARN: a MiniMRYarnCluster (ResourceManager, one NodeManager, MapReduce
 * on YARN) on the cluster's own HDFS, started on the first request for it, so a cluster that
 * never runs a YARN job pays nothing for it. Sized for a 2-core box: a small
 * ApplicationMaster, small map JVMs (the work happens in the weibo-etl binary they pipe to), no
 * JobHistoryServer, and a disk check that does not turn the only node unhealthy on a full
 * disk.
 *
 * <p>Streaming jobs run in this JVM ({@link #stream}), as {@code mapred streaming} would run
 * them against a real ResourceManager.
 */
final class Yarn {
  private static MiniMRYarnCluster cluster;

  private Yarn() {}

  /** Starts YARN unless it runs; returns the ResourceManager's address. */
  static synchronized String start(Configuration base, File dataDir, String jdkFlags)
      throws Exception {
    if (cluster == null) {
      Configuration conf = new Configuration(base);
      // Every container is a JVM plus what it runs: room for an AM and four maps at once.
      conf.setInt("yarn.minicluster.yarn.nodemanager.resource.memory-mb", 8192);
      conf.setInt("yarn.nodemanager.resource.memory-mb", 8192);
      conf.setInt("yarn.scheduler.minimum-allocation-mb", 256);
      conf.setInt("yarn.app.mapreduce.am.resource.mb", 512);
      conf.set("yarn.app.mapreduce.am.command-opts", "-Xmx384m " + jdkFlags);
      conf.setInt("mapreduce.map.memory.mb", 1024);
      conf.set("mapreduce.map.java.opts", "-Xmx256m " + jdkFlags);
      conf.set("mapreduce.reduce.java.opts", "-Xmx256m " + jdkFlags);
      // The binary's threads reserve far more virtual memory than they use.
      conf.setBoolean("yarn.nodemanager.vmem-check-enabled", false);
      conf.setFloat(
          "yarn.nodemanager.disk-health-checker.max-disk-utilization-per-disk-percentage", 99.5f);
      conf.setBoolean("mapreduce.jobhistory.minicluster.enabled", false);
      // Speculative attempts would only double the work of one box.
      conf.setBoolean("mapreduce.map.speculative", false);
      conf.setBoolean("mapreduce.reduce.speculative", false);
      conf.set("mapreduce.jobtracker.staging.root.dir", "/tmp/hadoop-yarn/staging");
      conf.set("yarn.app.mapreduce.am.staging-dir", "/tmp/hadoop-yarn/staging");
      System.setProperty("test.build.data", new File(dataDir, "yarn").getPath());
      MiniMRYarnCluster mr = new MiniMRYarnCluster("weibo-etl-yarn", 1, false);
      mr.init(conf);
      mr.start();
      cluster = mr;
      LocalCluster.log("YARN up, ResourceManager at "
          + mr.getConfig().get("yarn.resourcemanager.address"));
    }
    return cluster.getConfig().get("yarn.resourcemanager.address");
  }

  /** Whether YARN runs. */
  static synchronized boolean running() {
    return cluster != null;
  }

  /**
   * Runs one Hadoop Streaming job with these arguments and waits for its end. Returns the
   * line for the control port: {@code <exit status> <job id> <state> <tracking URL>}.
   */
  static String stream(String[] args) throws Exception {
    Configuration conf;
    synchronized (Yarn.class) {
      if (cluster == null) {
        throw new IllegalStateException("YARN is not running: start it with `cluster up --yarn`");
      }
      conf = new Configuration(cluster.getConfig());
    }
    Job job = new Job();
    int status = ToolRunner.run(new JobConf(conf), job, args);
    String id = job.id();
    String state = job.state(status);
    String url = job.url();
    LocalCluster.log("streaming job " + id + ": " + state + " (exit " + status + ")");
    return status + " " + id + " " + state + " " + url;
  }

  /** StreamJob, with the id, state and tracking URL of the job it ran. */
  private static final class Job extends StreamJob {
    String id() {
      return jobId_ == null ? "-" : jobId_.toString();
    }

    /**
     * The job's final state. With no JobHistoryServer a finished job's status may no longer
     * be fetched; StreamJob's exit status (0 only when the job succeeded) decides then.
     */
    String state(int status) {
      if (running_ == null) {
        return "NOT_SUBMITTED";
      }
      try {
        return running_.getJobStatus().getState().name();
      } catch (Exception e) {
        return status == 0 ? "SUCCEEDED" : "FAILED";
      }
    }

    String url() {
      return running_ == null ? "-" : running_.getTrackingURL();
    }
  }
}
