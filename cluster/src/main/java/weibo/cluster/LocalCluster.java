package weibo.cluster;

import java.io.File;
import java.util.concurrent.TimeUnit;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.hbase.HBaseConfiguration;
import org.apache.hadoop.hbase.HBaseTestingUtility;
import org.apache.hadoop.hbase.StartMiniClusterOption;
import org.apache.hadoop.hdfs.MiniDFSCluster;
import org.apache.thrift.protocol.TBinaryProtocol;
import org.apache.thrift.transport.TSocket;

/**
 * One JVM holding the whole local stack that weibo-etl talks to:
 *
 * <ul>
 *   <li>HDFS: a MiniDFSCluster whose NameNode listens on 127.0.0.1:9000;
 *   <li>HBase: a mini cluster (ZooKeeper, master, one region server) whose root dir lives on that
 *       HDFS, so the local shape matches production;
 *   <li>a control port on 127.0.0.1:9092 that runs HBase's bulk load in this JVM;
 *   <li>the Thrift1 gateway on 127.0.0.1:9090 (what the loader and happybase use) and the Thrift2
 *       gateway on 127.0.0.1:9091 (used only for admin calls Thrift1 lacks: namespaces and
 *       pre-split table creation).
 * </ul>
 *
 * <p>It prints {@code READY ...} on stdout only after HDFS answers, HBase has its master up and
 * both gateways answer a real Thrift call. It shuts everything down on SIGTERM, on a line on stdin
 * when started with {@code --stop-on-stdin}, or when the process named by {@code --watch-pid}
 * exits (so a test run that started it never leaves it behind).
 */
public final class LocalCluster {
  private static volatile boolean stopping = false;
  /** The data folder, where YARN keeps its node's local and log folders too. */
  private static File dataDir;

  public static void main(String[] args) throws Exception {
    String dataDir = "target/local-cluster/data";
    int nnPort = 9000;
    int thriftPort = 9090;
    int thrift2Port = 9091;
    int controlPort = 9092;
    long watchPid = -1;
    boolean stopOnStdin = false;
    for (int i = 0; i < args.length; i++) {
      switch (args[i]) {
        case "--data-dir": dataDir = args[++i]; break;
        case "--namenode-port": nnPort = Integer.parseInt(args[++i]); break;
        case "--thrift-port": thriftPort = Integer.parseInt(args[++i]); break;
        case "--thrift2-port": thrift2Port = Integer.parseInt(args[++i]); break;
        case "--control-port": controlPort = Integer.parseInt(args[++i]); break;
        case "--watch-pid": watchPid = Long.parseLong(args[++i]); break;
        case "--stop-on-stdin": stopOnStdin = true; break;
        default:
          System.err.println("unknown argument: " + args[i]);
          System.exit(2);
      }
    }
    long started = System.nanoTime();
    File data = new File(dataDir).getAbsoluteFile();
    LocalCluster.dataDir = data;
    deleteRecursively(data);
    data.mkdirs();
    System.setProperty("test.build.data.basedirectory", new File(data, "hbase-test").getPath());

    Configuration conf = HBaseConfiguration.create();
    conf.set(MiniDFSCluster.HDFS_MINIDFS_BASEDIR, new File(data, "dfs").getPath());
    conf.setInt("dfs.replication", 1);
    conf.setBoolean("dfs.permissions.enabled", false);
    conf.set("dfs.namenode.rpc-bind-host", "127.0.0.1");
    conf.set("dfs.datanode.address", "127.0.0.1:0");
    conf.set("dfs.datanode.ipc.address", "127.0.0.1:0");
    conf.set("dfs.datanode.http.address", "127.0.0.1:0");
    conf.set("dfs.namenode.http-address", "127.0.0.1:0");
    // No web UIs: they take ports and time, and nothing here reads them.
    conf.setInt("hbase.master.info.port", -1);
    conf.setInt("hbase.regionserver.info.port", -1);
    conf.setInt("hbase.thrift.info.port", -1);
    // The filesystem WAL provider avoids the async-WAL's fan-out to datanodes on one box.
    conf.set("hbase.wal.provider", "filesystem");
    conf.set("hbase.wal.meta_provider", "filesystem");
    // ZSTD through zstd-jni (hbase-compression-zstd), since Maven's libhadoop lacks native zstd.
    conf.set("hbase.io.compress.zstd.codec", "org.apache.hadoop.hbase.io.compress.zstd.ZstdCodec");
    // A region server that hosts the regions of a pre-split table right away: no balancer churn.
    conf.setBoolean("hbase.balancer.tablesOnMaster", false);
    conf.setInt("hbase.regionserver.handler.count", 30);
    // Compacted-away HFiles and rolled WALs are garbage on a throwaway cluster: keep them one
    // minute, not 5 and 10, or a large load fills the disk with them (seen: 22 GB of 37).
    conf.setLong("hbase.master.hfilecleaner.ttl", 60_000L);
    conf.setLong("hbase.master.logcleaner.ttl", 60_000L);
    // Thrift workers: one per client connection (the loader opens one per writer).
    conf.setInt("hbase.thrift.minWorkerThreads", 16);
    conf.setInt("hbase.thrift.maxWorkerThreads", 256);
    // A bulk-loaded HFile is scanned for order and region bounds before it is adopted, so a
    // writer bug fails the load instead of corrupting a region.
    conf.setBoolean("hbase.hstore.bulkload.verify", true);

    MiniDFSCluster dfs =
        new MiniDFSCluster.Builder(conf).nameNodePort(nnPort).numDataNodes(1).format(true).build();
    dfs.waitActive();
    String fsUrl = "hdfs://127.0.0.1:" + nnPort;
    conf.set("fs.defaultFS", fsUrl);
    log("HDFS up at " + fsUrl);

    HBaseTestingUtility util = new HBaseTestingUtility(conf);
    util.setDFSCluster(dfs);
    util.startMiniCluster(
        StartMiniClusterOption.builder().numMasters(1).numRegionServers(1).numDataNodes(1)
            .build());
    log("HBase up, root dir " + util.getConfiguration().get("hbase.rootdir"));

    Thread thrift1 = startThrift(
        new org.apache.hadoop.hbase.thrift.ThriftServer(new Configuration(util.getConfiguration())),
        thriftPort, "thrift1");
    Thread thrift2 = startThrift(
        new org.apache.hadoop.hbase.thrift2.ThriftServer(new Configuration(util.getConfiguration())),
        thrift2Port, "thrift2");
    waitForThrift1(thriftPort);
    waitForThrift2(thrift2Port);

    // Native HBase clients (the benchmark's Java anchor) find the cluster through ZooKeeper.
    java.nio.file.Files.writeString(
        new File(data, "zookeeper-port").toPath(),
        util.getZkCluster().getClientPort() + "\n");

    startControl(new Configuration(util.getConfiguration()), controlPort);

    Runtime.getRuntime().addShutdownHook(new Thread(() -> shutdown(util), "local-cluster-shutdown"));

    double secs = (System.nanoTime() - started) / 1e9;
    System.out.printf(
        "READY hdfs=%s thrift=127.0.0.1:%d thrift2=127.0.0.1:%d seconds=%.1f%n",
        fsUrl, thriftPort, thrift2Port, secs);
    System.out.flush();

    if (stopOnStdin) {
      Thread t = new Thread(() -> {
        try {
          System.in.read();
        } catch (Exception ignored) {
          // EOF or error both mean: stop.
        }
        System.exit(0);
      }, "stdin-watch");
      t.setDaemon(true);
      t.start();
    }
    while (!stopping) {
      if (watchPid > 0 && !ProcessHandle.of(watchPid).map(ProcessHandle::isAlive).orElse(false)) {
        log("watched process " + watchPid + " is gone; stopping");
        System.exit(0);
      }
      TimeUnit.MILLISECONDS.sleep(500);
    }
  }

  private static Thread startThrift(
      org.apache.hadoop.hbase.thrift.ThriftServer server, int port, String name) {
    Thread t = new Thread(() -> {
      try {
        server.run(new String[] {"-port", String.valueOf(port), "-bind", "127.0.0.1",
            "-threadpool", "start"});
      } catch (Exception e) {
        if (!stopping) {
          System.err.println(name + " server failed: " + e);
          e.printStackTrace();
          System.exit(3);
        }
      }
    }, name);
    t.setDaemon(true);
    t.start();
    return t;
  }

  /**
   * The control port: one request line per connection, {@code BULKLOAD <dir> <table>}, answered
   * by one line, {@code OK <files>} or {@code ERR <reason>}. It runs HBase's own bulk load
   * (what {@code hbase completebulkload} runs) inside this JVM, so a hand-over does not pay for
   * a JVM of its own. Bound to 127.0.0.1 only.
   */
  private static void startControl(Configuration conf, int port) throws Exception {
    java.net.ServerSocket server =
        new java.net.ServerSocket(port, 16, java.net.InetAddress.getByName("127.0.0.1"));
    Thread t = new Thread(() -> {
      while (!stopping) {
        try {
          java.net.Socket socket = server.accept();
          Thread worker = new Thread(() -> serveControl(conf, socket), "control-request");
          worker.setDaemon(true);
          worker.start();
        } catch (Exception e) {
          if (!stopping) {
            System.err.println("control port: " + e);
          }
        }
      }
    }, "control");
    t.setDaemon(true);
    t.start();
  }

  private static void serveControl(Configuration conf, java.net.Socket socket) {
    try (socket;
        java.io.BufferedReader in = new java.io.BufferedReader(
            new java.io.InputStreamReader(socket.getInputStream(), "UTF-8"));
        java.io.PrintWriter out = new java.io.PrintWriter(
            new java.io.OutputStreamWriter(socket.getOutputStream(), "UTF-8"), true)) {
      String line = in.readLine();
      String[] parts = line == null ? new String[0] : line.trim().split(" ");
      if (parts.length == 1 && parts[0].equals("YARN")) {
        try {
          out.println("OK " + Yarn.start(conf, dataDir, jdkFlags()));
        } catch (Throwable e) {
          log("YARN did not start: " + e);
          out.println("ERR " + String.valueOf(e).replace('\n', ' '));
        }
        return;
      }
      if (line != null && line.startsWith("STREAMING\t")) {
        // Tab-separated, so an argument may hold spaces.
        String[] jobArgs = line.substring("STREAMING\t".length()).split("\t", -1);
        try {
          out.println("OK " + Yarn.stream(jobArgs));
        } catch (Throwable e) {
          log("streaming job failed to run: " + e);
          out.println("ERR " + String.valueOf(e).replace('\n', ' '));
        }
        return;
      }
      if (parts.length == 2 && parts[0].equals("COMPACT")) {
        try {
          out.println("OK " + majorCompact(conf, parts[1]));
        } catch (Throwable e) {
          out.println("ERR " + String.valueOf(e).replace('\n', ' '));
        }
        return;
      }
      if (parts.length != 3 || !parts[0].equals("BULKLOAD")) {
        out.println(
            "ERR expected: BULKLOAD <dir> <table>, COMPACT <table>, YARN or STREAMING\t<args>");
        return;
      }
      try {
        java.util.Map<?, ?> loaded = org.apache.hadoop.hbase.tool.BulkLoadHFiles.create(conf)
            .bulkLoad(org.apache.hadoop.hbase.TableName.valueOf(parts[2]),
                new org.apache.hadoop.fs.Path(parts[1]));
        log("bulk load of " + parts[1] + " into " + parts[2] + ": " + loaded.size() + " files");
        out.println("OK " + loaded.size());
      } catch (Throwable e) {
        log("bulk load of " + parts[1] + " into " + parts[2] + " failed: " + e);
        out.println("ERR " + String.valueOf(e).replace('\n', ' '));
      }
    } catch (Exception e) {
      System.err.println("control request: " + e);
    }
  }

  /**
   * Major-compacts a table and waits until HBase says no compaction runs on it; returns the
   * seconds waited. The request is queued asynchronously, so a state of NONE counts only
   * after the compaction was seen running or a grace period passed.
   */
  private static double majorCompact(Configuration conf, String table) throws Exception {
    long started = System.nanoTime();
    try (org.apache.hadoop.hbase.client.Connection c =
            org.apache.hadoop.hbase.client.ConnectionFactory.createConnection(conf);
        org.apache.hadoop.hbase.client.Admin admin = c.getAdmin()) {
      org.apache.hadoop.hbase.TableName name = org.apache.hadoop.hbase.TableName.valueOf(table);
      admin.majorCompact(name);
      boolean seen = false;
      while (true) {
        TimeUnit.MILLISECONDS.sleep(250);
        boolean running = admin.getCompactionState(name)
            != org.apache.hadoop.hbase.client.CompactionState.NONE;
        seen |= running;
        double secs = (System.nanoTime() - started) / 1e9;
        if (!running && (seen || secs > 5)) {
          return secs;
        }
        if (secs > 600) {
          throw new IllegalStateException("major compaction of " + table + " still running");
        }
      }
    }
  }

  /** This JVM's --add-opens and --add-exports flags: JDK 17 containers need them too. */
  private static String jdkFlags() {
    StringBuilder flags = new StringBuilder();
    for (String arg : java.lang.management.ManagementFactory.getRuntimeMXBean().getInputArguments()) {
      if (arg.startsWith("--add-opens") || arg.startsWith("--add-exports") || arg.startsWith("--add-modules")
          || arg.startsWith("-Dorg.apache.hbase.thirdparty")) {
        flags.append(arg).append(' ');
      }
    }
    return flags.toString().trim();
  }

  /** Ready means a real Thrift1 call answers, not merely that the port accepts. */
  private static void waitForThrift1(int port) throws Exception {
    Exception last = null;
    for (int i = 0; i < 600; i++) {
      try (TSocket socket = new TSocket("127.0.0.1", port)) {
        socket.open();
        org.apache.hadoop.hbase.thrift.generated.Hbase.Client c =
            new org.apache.hadoop.hbase.thrift.generated.Hbase.Client(new TBinaryProtocol(socket));
        c.getTableNames();
        return;
      } catch (Exception e) {
        last = e;
        TimeUnit.MILLISECONDS.sleep(100);
      }
    }
    throw new IllegalStateException("thrift1 did not answer on port " + port, last);
  }

  private static void waitForThrift2(int port) throws Exception {
    Exception last = null;
    for (int i = 0; i < 600; i++) {
      try (TSocket socket = new TSocket("127.0.0.1", port)) {
        socket.open();
        org.apache.hadoop.hbase.thrift2.generated.THBaseService.Client c =
            new org.apache.hadoop.hbase.thrift2.generated.THBaseService.Client(
                new TBinaryProtocol(socket));
        c.getTableNamesByNamespace("default");
        return;
      } catch (Exception e) {
        last = e;
        TimeUnit.MILLISECONDS.sleep(100);
      }
    }
    throw new IllegalStateException("thrift2 did not answer on port " + port, last);
  }

  private static void shutdown(HBaseTestingUtility util) {
    stopping = true;
    log("shutting down");
    // The mini clusters' orderly shutdown can take minutes (ZooKeeper waits, WAL cleaners);
    // the data dir is wiped at every start anyway, so past a grace period just halt.
    Thread watchdog = new Thread(() -> {
      try {
        TimeUnit.SECONDS.sleep(15);
      } catch (InterruptedException ignored) {
        return;
      }
      log("shutdown grace period over; halting");
      Runtime.getRuntime().halt(0);
    }, "shutdown-watchdog");
    watchdog.setDaemon(true);
    watchdog.start();
    try {
      util.shutdownMiniCluster();
    } catch (Exception e) {
      System.err.println("shutdown: " + e);
    }
    log("stopped");
  }

  static void log(String msg) {
    System.err.println("[local-cluster] " + msg);
    System.err.flush();
  }

  private static void deleteRecursively(File f) {
    File[] children = f.listFiles();
    if (children != null) {
      for (File c : children) {
        deleteRecursively(c);
      }
    }
    f.delete();
  }
}
