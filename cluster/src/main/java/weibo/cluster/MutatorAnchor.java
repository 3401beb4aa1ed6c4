package weibo.cluster;

import java.io.BufferedReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.security.MessageDigest;
import java.util.ArrayList;
import java.util.Base64;
import java.util.List;
import java.util.concurrent.atomic.AtomicLong;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.hbase.HBaseConfiguration;
import org.apache.hadoop.hbase.TableName;
import org.apache.hadoop.hbase.client.Admin;
import org.apache.hadoop.hbase.client.BufferedMutator;
import org.apache.hadoop.hbase.client.BufferedMutatorParams;
import org.apache.hadoop.hbase.client.ColumnFamilyDescriptorBuilder;
import org.apache.hadoop.hbase.client.Connection;
import org.apache.hadoop.hbase.client.ConnectionFactory;
import org.apache.hadoop.hbase.client.Put;
import org.apache.hadoop.hbase.client.TableDescriptorBuilder;

/**
 * The upper anchor of the load benchmark: HBase's native Java client ({@link BufferedMutator}),
 * no Thrift gateway, writing exactly the rows the happybase peer writes (row key
 * {@code md5(key)[0..2] + key}, one {@code info:<column>} cell per column) into a table created
 * the way the peer creates its own.
 *
 * <p>Input: a TSV whose first line names the columns and whose other lines hold the row key and
 * then each cell value, all base64 (the bench script writes it from the same Parquet file the
 * peer reads). Output: one JSON line, like the peer's.
 *
 * <p>Usage: {@code MutatorAnchor --zookeeper-port P --table ns:t --tsv FILE [--threads N]}
 */
public final class MutatorAnchor {
  private MutatorAnchor() {}

  public static void main(String[] args) throws Exception {
    int zkPort = 0;
    int threads = 4;
    String table = null;
    String tsv = null;
    for (int i = 0; i < args.length; i++) {
      switch (args[i]) {
        case "--zookeeper-port": zkPort = Integer.parseInt(args[++i]); break;
        case "--threads": threads = Integer.parseInt(args[++i]); break;
        case "--table": table = args[++i]; break;
        case "--tsv": tsv = args[++i]; break;
        default:
          System.err.println("unknown argument: " + args[i]);
          System.exit(2);
      }
    }
    if (zkPort == 0 || table == null || tsv == null) {
      System.err.println("usage: MutatorAnchor --zookeeper-port P --table ns:t --tsv FILE [--threads N]");
      System.exit(2);
    }

    Base64.Decoder b64 = Base64.getDecoder();
    byte[][] qualifiers;
    List<byte[][]> rows = new ArrayList<>();
    try (BufferedReader in = Files.newBufferedReader(Paths.get(tsv), StandardCharsets.UTF_8)) {
      String[] names = in.readLine().split("\t");
      qualifiers = new byte[names.length][];
      for (int i = 0; i < names.length; i++) {
        qualifiers[i] = names[i].getBytes(StandardCharsets.UTF_8);
      }
      String line;
      while ((line = in.readLine()) != null) {
        String[] fields = line.split("\t", -1);
        byte[][] row = new byte[fields.length][];
        for (int i = 0; i < fields.length; i++) {
          row[i] = b64.decode(fields[i]);
        }
        rows.add(row);
      }
    }

    Configuration conf = HBaseConfiguration.create();
    conf.set("hbase.zookeeper.quorum", "127.0.0.1");
    conf.setInt("hbase.zookeeper.property.clientPort", zkPort);
    byte[] family = "info".getBytes(StandardCharsets.UTF_8);
    TableName name = TableName.valueOf(table);
    try (Connection conn = ConnectionFactory.createConnection(conf)) {
      try (Admin admin = conn.getAdmin()) {
        String ns = name.getNamespaceAsString();
        if (!"default".equals(ns)
            && java.util.Arrays.stream(admin.listNamespaces()).noneMatch(ns::equals)) {
          admin.createNamespace(org.apache.hadoop.hbase.NamespaceDescriptor.create(ns).build());
        }
        if (!admin.tableExists(name)) {
          admin.createTable(TableDescriptorBuilder.newBuilder(name)
              .setColumnFamily(ColumnFamilyDescriptorBuilder.of(family)).build());
        }
      }
      AtomicLong bytes = new AtomicLong();
      long started = System.nanoTime();
      List<Thread> workers = new ArrayList<>();
      int step = (rows.size() + threads - 1) / threads;
      List<Exception> failures = new ArrayList<>();
      for (int t = 0; t < threads; t++) {
        List<byte[][]> slice = rows.subList(Math.min(rows.size(), t * step),
            Math.min(rows.size(), (t + 1) * step));
        Thread w = new Thread(() -> {
          try (BufferedMutator m = conn.getBufferedMutator(new BufferedMutatorParams(name))) {
            MessageDigest md5 = MessageDigest.getInstance("MD5");
            long n = 0;
            for (byte[][] row : slice) {
              byte[] key = row[0];
              byte[] hash = md5.digest(key);
              byte[] rowKey = new byte[key.length + 2];
              rowKey[0] = hash[0];
              rowKey[1] = hash[1];
              System.arraycopy(key, 0, rowKey, 2, key.length);
              Put put = new Put(rowKey);
              n += rowKey.length;
              for (int i = 1; i < row.length && i < qualifiers.length; i++) {
                put.addColumn(family, qualifiers[i], row[i]);
                n += row[i].length;
              }
              m.mutate(put);
            }
            m.flush();
            bytes.addAndGet(n);
          } catch (Exception e) {
            synchronized (failures) {
              failures.add(e);
            }
          }
        }, "anchor-writer-" + t);
        w.start();
        workers.add(w);
      }
      for (Thread w : workers) {
        w.join();
      }
      if (!failures.isEmpty()) {
        throw failures.get(0);
      }
      double secs = (System.nanoTime() - started) / 1e9;
      System.out.printf(
          "{\"peer\": \"java-bufferedmutator\", \"job\": \"load\", \"rows\": %d, \"seconds\": %.3f, "
              + "\"rows_per_s\": %d, \"mb_per_s\": %.2f, \"threads\": %d}%n",
          rows.size(), secs, Math.round(rows.size() / secs), bytes.get() / 1e6 / secs, threads);
    }
  }
}
