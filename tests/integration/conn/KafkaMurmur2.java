import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.HexFormat;
import org.apache.kafka.common.utils.Utils;

/** Reads hex-encoded keys, one per line, and prints Kafka's own murmur2 of each. */
public class KafkaMurmur2 {
  public static void main(String[] args) throws Exception {
    BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
    String line;
    while ((line = in.readLine()) != null) {
      System.out.println(Utils.murmur2(HexFormat.of().parseHex(line.trim())));
    }
  }
}
