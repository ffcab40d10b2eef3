-- title: All orders (200k rows)
-- description: Every order in the sample shop: a large export to watch progress on.
-- source: shop
-- sheet: Orders
-- count: true
-- resume: id
-- column: id "Order" int
-- column: created_at "Created" datetime(yyyy-mm-dd hh:mm)
-- column: customer_id "Customer no."
-- column: product_id "Product no."
-- column: quantity "Quantity" int
-- column: unit_price "Unit price" number(#,##0.00)
-- column: total "Total" number(#,##0.00)
-- column: status "Status"
-- column: paid "Paid" bool
-- column: note "Note"
SELECT o.id, o.created_at, o.customer_id, o.product_id, o.quantity, o.unit_price, o.total,
       o.status, o.paid, o.note
FROM orders o
ORDER BY o.id;
